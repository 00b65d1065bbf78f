package golden

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// chartSchema is chart-testing's etc/chart_schema.yaml (`ct lint` checks
// Chart.yaml with it, strictly): each key, and whether it is required.
var chartSchema = map[string]bool{
	"name": true, "home": true, "version": true, "apiVersion": true, "description": true,
	"appVersion": false, "keywords": false, "sources": false, "maintainers": false, "icon": false,
	"engine": false, "condition": false, "tags": false, "deprecated": false, "kubeVersion": false,
	"annotations": false, "type": false,
}

// Chart.yaml passes chart-testing's schema: the keys it knows, those it
// requires, maintainers with a name, annotations of strings.
func TestChartYAMLSchema(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(ChartDir(), "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart map[string]any
	if err := yaml.Unmarshal(raw, &chart); err != nil {
		t.Fatal(err)
	}
	for k := range chart {
		if _, ok := chartSchema[k]; !ok {
			t.Errorf("Chart.yaml: %s is not in chart-testing's schema", k)
		}
	}
	for k, required := range chartSchema {
		if _, ok := chart[k]; required && !ok {
			t.Errorf("Chart.yaml: %s is required", k)
		}
	}
	for _, k := range []string{"name", "home", "version", "apiVersion", "description", "icon", "kubeVersion", "type"} {
		if _, ok := chart[k].(string); !ok {
			t.Errorf("Chart.yaml: %s is not a string", k)
		}
	}
	for _, m := range chart["maintainers"].([]any) {
		mm := m.(map[string]any)
		for k, v := range mm {
			if _, ok := v.(string); !ok || (k != "name" && k != "email" && k != "url") {
				t.Errorf("maintainer %v: %s", mm, k)
			}
		}
		// chart-testing looks each name up as a GitHub account.
		if name, _ := mm["name"].(string); !regexp.MustCompile(`^[A-Za-z0-9](-?[A-Za-z0-9])*$`).MatchString(name) {
			t.Errorf("maintainer name %q cannot be a GitHub account", name)
		}
	}
	for k, v := range chart["annotations"].(map[string]any) {
		if _, ok := v.(string); !ok {
			t.Errorf("annotation %s is a %T, not a string", k, v)
		}
	}
}

// lintProblems applies the rules of chart-testing's lintconf.yaml (the
// yamllint configuration `ct lint` runs on Chart.yaml and values*.yaml) that
// a line can show: trailing spaces, tabs, CR line ends, comments without a
// space after "#" or fewer than two spaces after content, spaces inside
// non-empty braces and brackets, more than one space after a colon or a
// hyphen, at most two empty lines in a row and none at the start or end,
// and no key twice.
func lintProblems(raw []byte) []string {
	var out []string
	report := func(n int, problem string) {
		out = append(out, fmt.Sprintf("line %d: %s", n, problem))
	}
	lines := strings.Split(string(raw), "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	empty := 0
	inBlock, blockIndent := false, 0
	for i, l := range lines {
		n := i + 1
		if strings.HasSuffix(l, "\r") {
			report(n, "CR line end")
		}
		if strings.TrimRight(l, " \t") != l {
			report(n, "trailing spaces")
		}
		if strings.Contains(l, "\t") {
			report(n, "tab")
		}
		if strings.TrimSpace(l) == "" {
			empty++
			if empty > 2 || i == empty-1 {
				report(n, "too many blank lines")
			}
			continue
		}
		empty = 0
		indent := len(l) - len(strings.TrimLeft(l, " "))
		if inBlock && indent > blockIndent {
			continue // inside a block scalar: text, not YAML
		}
		inBlock = false
		code, comment := splitComment(l)
		if comment != "" {
			if !regexp.MustCompile(`^#([ !]|$)`).MatchString(comment) && !strings.HasPrefix(comment, "#!") {
				report(n, "comment without a space after #")
			}
			if strings.TrimSpace(code) != "" && !strings.HasSuffix(code, "  ") {
				report(n, "fewer than two spaces before a comment")
			}
		}
		c := stripQuoted(code)
		if regexp.MustCompile(`[{\[] +[^ }\]]|[^ {\[] +[}\]]`).MatchString(c) {
			report(n, "spaces inside braces or brackets")
		}
		if regexp.MustCompile(`: {2,}\S`).MatchString(c) || regexp.MustCompile(`^ *- {2,}\S`).MatchString(c) {
			report(n, "more than one space after a colon or hyphen")
		}
		if regexp.MustCompile(`[|>][-+]?[0-9]?\s*$`).MatchString(strings.TrimRight(c, " ")) && strings.Contains(c, ":") {
			inBlock, blockIndent = true, indent
		}
	}
	if empty > 0 {
		report(len(lines), "blank lines at the end")
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		out = append(out, err.Error())
	} else if err := doc.Decode(new(map[string]any)); err != nil {
		out = append(out, err.Error()) // duplicate keys
	}
	return out
}

// splitComment cuts a line at its comment: a "#" at the start or after a
// space, outside quotes.
func splitComment(l string) (code, comment string) {
	var quote rune
	for i, r := range l {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '"' || r == '\'':
			quote = r
		case r == '#' && (i == 0 || l[i-1] == ' '):
			return l[:i], l[i:]
		}
	}
	return l, ""
}

var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'[^']*'`)

func stripQuoted(s string) string { return quoted.ReplaceAllString(s, `""`) }

// Chart.yaml and values.yaml are clean under chart-testing's yamllint rules.
func TestChartTestingYAMLLint(t *testing.T) {
	for _, f := range []string{"Chart.yaml", "values.yaml"} {
		raw, err := os.ReadFile(filepath.Join(ChartDir(), f))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range lintProblems(raw) {
			t.Errorf("%s: %s", f, p)
		}
	}
}

// The rules above must catch what they name.
func TestLintProblemsCatch(t *testing.T) {
	for _, bad := range []string{
		"a: 1 \n",
		"a: 1\n\n\n\nb: 2\n",
		"\na: 1\n",
		"a: 1\n\n",
		"#comment\na: 1\n",
		"a: 1 # close\n",
		"a: { b: 1 }\n",
		"a: [ 1, 2 ]\n",
		"a:  1\n",
		"a:\n  -  x\n",
		"a: 1\na: 2\n",
		"a:\tb\n",
	} {
		if len(lintProblems([]byte(bad))) == 0 {
			t.Errorf("no problem found in %q", bad)
		}
	}
	for _, good := range []string{
		"a: {}\nb: []\nc: {d: 1}\n",
		"# a comment\na: 1  # after\n",
		"a: |\n  text  with  # anything\n   indented {  }\nb: \"x: { y }\"\n",
		"a:\n  - b\n  - c: 1\n",
	} {
		if p := lintProblems([]byte(good)); len(p) != 0 {
			t.Errorf("%q: %v", good, p)
		}
	}
}

// With yamllint installed (Debian's yamllint package), the chart passes it
// under chart-testing's own lintconf.yaml too.
func TestChartTestingYAMLLintWithYamllint(t *testing.T) {
	bin, err := exec.LookPath("yamllint")
	if err != nil {
		t.Skip("yamllint is not installed (apt-get install yamllint)")
	}
	conf := filepath.Join(t.TempDir(), "lintconf.yaml")
	if err := os.WriteFile(conf, []byte(ctLintConf), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := exec.Command(bin, "--strict", "-c", conf, filepath.Join(ChartDir(), "Chart.yaml"), filepath.Join(ChartDir(), "values.yaml"))
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Errorf("yamllint: %v\n%s", err, out.String())
	}
}

// ctLintConf is chart-testing's etc/lintconf.yaml.
const ctLintConf = `rules:
  braces: {min-spaces-inside: 0, max-spaces-inside: 0, min-spaces-inside-empty: -1, max-spaces-inside-empty: -1}
  brackets: {min-spaces-inside: 0, max-spaces-inside: 0, min-spaces-inside-empty: -1, max-spaces-inside-empty: -1}
  colons: {max-spaces-before: 0, max-spaces-after: 1}
  commas: {max-spaces-before: 0, min-spaces-after: 1, max-spaces-after: 1}
  comments: {require-starting-space: true, min-spaces-from-content: 2}
  document-end: disable
  document-start: disable
  empty-lines: {max: 2, max-start: 0, max-end: 0}
  hyphens: {max-spaces-after: 1}
  indentation: {spaces: consistent, indent-sequences: whatever, check-multi-line-strings: false}
  key-duplicates: enable
  line-length: disable
  new-line-at-end-of-file: disable
  new-lines: {type: unix}
  trailing-spaces: enable
  truthy: {level: warning}
`
