package golden

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kubefledged/kube-fledged/hack/valuesdoc"
)

// A setting has one description: the "# --" comment above its key in the
// chart's values.yaml. hack/chart-readme renders it into the chart's README;
// everywhere else that describes a setting must say the same words, without
// the "--flag: " that starts the description of a value that sets a flag:
//
//   - the CSV's specDescriptors of KubeFledged, whose path is the value's key;
//   - the bullets "* **key**: text" of the CSV's description;
//   - the last cell of a table row of README.md or docs/*.md whose first
//     cell is a flag a value sets or a value's key, in code: README.md's
//     flag table, and any such table docs/ gains.
//
// Prose in docs/ explains settings in context and is not held to this;
// tables and lists that define them are. The CSV is checked in
// config/manifests/bases, its source: `make bundle` copies it, and
// `make verify` fails when bundle/ drifts from it.

const csvBase = "config/manifests/bases/kube-fledged.clusterserviceversion.yaml"

// notSettings are descriptor paths inside a documented value, which OLM's
// console needs as they are: affinity.nodeAffinity gives the node-affinity
// widget, while values.yaml documents affinity as a whole.
var notSettings = map[string]bool{"affinity.nodeAffinity": true}

type setting struct{ key, flag, text string }

func settings(t *testing.T) (byKey, byFlag map[string]setting, sections map[string]bool) {
	t.Helper()
	raw, err := os.ReadFile(repoFile("helm-charts", "kubefledged", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := valuesdoc.Rows(raw)
	if err != nil {
		t.Fatal(err)
	}
	byKey, byFlag, sections = map[string]setting{}, map[string]setting{}, map[string]bool{}
	for _, r := range rows {
		flag, text := valuesdoc.Split(r.Description)
		s := setting{key: r.Key, flag: flag, text: text}
		byKey[r.Key] = s
		if flag != "" {
			byFlag[flag] = s
		}
		for k := r.Key; strings.Contains(k, "."); {
			k = k[:strings.LastIndex(k, ".")]
			sections[k] = true
		}
	}
	return byKey, byFlag, sections
}

// normal collapses white space: YAML folds and Markdown wraps lines.
func normal(s string) string { return strings.Join(strings.Fields(s), " ") }

func mismatch(where, what string, s setting, have string) string {
	return fmt.Sprintf("%s: %s says\n\t%s\nbut its one description, the \"# --\" comment above %s in helm-charts/kubefledged/values.yaml, says\n\t%s\n"+
		"Make them equal: copy the values.yaml text there%s, or, if values.yaml is what is wrong, "+
		"fix it there, run `make chart-readme`, and copy it to the others; after a change of the CSV run `make bundle`.",
		where, what, have, s.key, s.text, withoutFlag(s.flag))
}

func withoutFlag(flag string) string {
	if flag == "" {
		return ""
	}
	return fmt.Sprintf(" (without its leading %q)", flag+": ")
}

func TestDescriptions(t *testing.T) {
	byKey, byFlag, sections := settings(t)

	t.Run("CSV specDescriptors", func(t *testing.T) {
		var csv struct {
			Spec struct {
				CRDs struct {
					Owned []struct {
						Kind        string `json:"kind"`
						Descriptors []struct {
							Path        string `json:"path"`
							Description string `json:"description"`
						} `json:"specDescriptors"`
					} `json:"owned"`
				} `json:"customresourcedefinitions"`
			} `json:"spec"`
		}
		readYAML(t, csvBase, &csv)
		seen := 0
		for _, crd := range csv.Spec.CRDs.Owned {
			if crd.Kind != "KubeFledged" {
				continue
			}
			for _, d := range crd.Descriptors {
				seen++
				s, ok := byKey[d.Path]
				switch {
				case ok:
					if normal(d.Description) != normal(s.text) {
						t.Error(mismatch(csvBase, "the specDescriptor of "+d.Path, s, normal(d.Description)))
					}
				case sections[d.Path] || notSettings[d.Path]:
					// A group of settings, described in its own words.
				default:
					t.Errorf("%s: the specDescriptor path %s is no value of helm-charts/kubefledged/values.yaml: fix the path, or document the value there with a \"# --\" comment", csvBase, d.Path)
				}
			}
		}
		if seen == 0 {
			t.Fatalf("%s: no specDescriptors of KubeFledged found: has the CSV's layout changed?", csvBase)
		}
	})

	t.Run("CSV description", func(t *testing.T) {
		var csv struct {
			Spec struct {
				Description string `json:"description"`
			} `json:"spec"`
		}
		readYAML(t, csvBase, &csv)
		bullets, odd := csvBullets(csv.Spec.Description)
		for _, l := range odd {
			t.Errorf("%s: spec.description has the bullet %q: describe one setting per bullet, as \"* **controller.someKey**: its values.yaml text\"", csvBase, l)
		}
		if len(bullets) == 0 {
			t.Fatalf("%s: spec.description has no \"* **key**: text\" bullets: has its layout changed?", csvBase)
		}
		for key, text := range bullets {
			s, ok := byKey[key]
			if !ok {
				t.Errorf("%s: spec.description describes **%s**, which is no value of helm-charts/kubefledged/values.yaml: name it by its full key (e.g. controller.jobRetentionPolicy)", csvBase, key)
				continue
			}
			if normal(text) != normal(s.text) {
				t.Error(mismatch(csvBase, "the bullet **"+key+"** of spec.description", s, normal(text)))
			}
		}
	})

	t.Run("README and docs tables", func(t *testing.T) {
		files, err := filepath.Glob(repoFile("docs", "*.md"))
		if err != nil {
			t.Fatal(err)
		}
		flags := 0
		for _, path := range append([]string{repoFile("README.md")}, files...) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			name := filepath.Base(path)
			if name != "README.md" {
				name = "docs/" + name
			}
			for _, row := range settingRows(string(raw)) {
				s, ok := byFlag[row.name]
				if !ok {
					s, ok = byKey[row.name]
				}
				if !ok {
					continue // a flag no value sets (the webhook's), or no setting at all
				}
				if strings.HasPrefix(row.name, "--") && name == "README.md" {
					flags++
				}
				if normal(row.meaning) != normal(s.text) {
					t.Error(mismatch(name, "the table row of "+row.name, s, normal(row.meaning)))
				}
			}
		}
		if flags == 0 {
			t.Fatal("README.md: no rows \"| `--flag` | default | meaning |\" of a flag a value sets: has the flag table's layout changed?")
		}
	})
}

func readYAML(t *testing.T, rel string, into any) {
	t.Helper()
	raw, err := os.ReadFile(repoFile(strings.Split(rel, "/")...))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, into); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
}

var bulletRE = regexp.MustCompile(`^\* \*\*([A-Za-z0-9.]+)\*\*: (.*)$`)

// csvBullets reads the bullets "* **key**: text" of a Markdown text, each
// continued by the indented lines after it; odd are the bullets that start
// with a bold word but are not of that form ("* **a** and **b**: ...").
func csvBullets(md string) (bullets map[string]string, odd []string) {
	bullets = map[string]string{}
	var key string
	for _, l := range strings.Split(md, "\n") {
		if m := bulletRE.FindStringSubmatch(l); m != nil {
			key = m[1]
			bullets[key] = m[2]
			continue
		}
		if strings.HasPrefix(l, "* **") {
			odd = append(odd, l)
			key = ""
			continue
		}
		if key != "" && strings.HasPrefix(l, "  ") && strings.TrimSpace(l) != "" {
			bullets[key] += " " + strings.TrimSpace(l)
			continue
		}
		key = ""
	}
	return bullets, odd
}

var settingRowRE = regexp.MustCompile("^\\| `([A-Za-z0-9.-]+)` \\|(?:.*\\|)? (.*) \\|$")

type settingRow struct{ name, meaning string }

// settingRows reads the rows of Markdown tables whose first cell is one
// name in code (`--flag`, `controller.someKey`): the last cell is what the
// row says it means. A pipe inside it is written `\|`.
func settingRows(md string) []settingRow {
	var out []settingRow
	for _, l := range strings.Split(md, "\n") {
		if m := settingRowRE.FindStringSubmatch(l); m != nil {
			out = append(out, settingRow{m[1], strings.ReplaceAll(m[2], `\|`, "|")})
		}
	}
	return out
}
