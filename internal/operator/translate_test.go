package operator

import (
	"bytes"
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/kubefledged/kube-fledged/test/golden"
)

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := golden.LoadChart()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func chartAliases(t *testing.T) []Alias {
	t.Helper()
	as, err := Aliases(loadChart(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(as) == 0 {
		t.Fatal("the chart has no aliases")
	}
	return as
}

func cr(spec map[string]interface{}) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{}}
	u.SetGroupVersionKind(KubeFledgedGVK)
	u.SetName("kubefledged")
	u.SetNamespace("kube-fledged")
	if spec != nil {
		u.Object["spec"] = spec
	}
	return u
}

func parse(t *testing.T, s string) map[string]interface{} {
	t.Helper()
	m := map[string]interface{}{}
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestTranslatorDropsLegacyKeysWhereNewKeysAreSet(t *testing.T) {
	tr := NewTranslator(chartAliases(t))
	spec := parse(t, `
controller: {jobRetentionPolicy: delete}
args: {controllerJobRetentionPolicy: retain, controllerImagePullPolicy: Always, webhookServerPort: 443}
controllerReplicaCount: 2
`)
	obj := cr(spec)
	got, err := tr.Translate(context.Background(), obj)
	if err != nil {
		t.Fatal(err)
	}
	want := parse(t, `
controller: {jobRetentionPolicy: delete}
args: {controllerImagePullPolicy: Always, webhookServerPort: 443}
controllerReplicaCount: 2
`)
	if !reflect.DeepEqual(map[string]interface{}(got), want) {
		t.Errorf("translated:\n got %v\nwant %v", got, want)
	}
	// The object itself is not touched: the reconciler writes it back.
	if _, ok := obj.Object["spec"].(map[string]interface{})["args"].(map[string]interface{})["controllerJobRetentionPolicy"]; !ok {
		t.Error("the translator changed the custom resource")
	}
}

func TestTranslatorWithoutSpec(t *testing.T) {
	got, err := NewTranslator(chartAliases(t)).Translate(context.Background(), cr(nil))
	if err != nil || len(got) != 0 {
		t.Errorf("got %v, %v", got, err)
	}
	bad := cr(nil)
	bad.Object["spec"] = "text"
	if _, err := NewTranslator(nil).Translate(context.Background(), bad); err == nil {
		t.Error("a non-object spec was accepted")
	}
}

func TestAliasesRefuseMalformedTables(t *testing.T) {
	for name, body := range map[string]string{
		"unknown field": "- {legacy: a, key: b, default: 1, typo: x}\n",
		"no key":        "- {legacy: a}\n",
		"not a list":    "legacy: a\n",
	} {
		c := &chart.Chart{Metadata: &chart.Metadata{Name: "x"}, Files: []*chart.File{{Name: AliasesFile, Data: []byte(body)}}}
		if _, err := Aliases(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if as, err := Aliases(&chart.Chart{Metadata: &chart.Metadata{Name: "x"}}); err != nil || as != nil {
		t.Errorf("chart without aliases: %v %v", as, err)
	}
}

// What the operator installs for a spec must be what `helm install` with the
// same values file gives: the legacy folding lives in the templates and the
// translator only settles precedence.
func TestOperatorAndHelmRenderTheSame(t *testing.T) {
	c := loadChart(t)
	tr := NewTranslator(chartAliases(t))
	files, err := filepath.Glob(filepath.Join(golden.ChartDir(), "..", "..", "test", "golden", "testdata", "*.values.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no values files: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".values.yaml")
		t.Run(name, func(t *testing.T) {
			vals, err := golden.ReadValues(f)
			if err != nil {
				t.Fatal(err)
			}
			direct, err := golden.Render(c, vals)
			if err != nil {
				t.Fatal(err)
			}
			translated, err := tr.Translate(context.Background(), cr(vals))
			if err != nil {
				t.Fatal(err)
			}
			viaOperator, err := golden.Render(c, translated)
			if err != nil {
				t.Fatal(err)
			}
			if direct.String() != viaOperator.String() {
				t.Errorf("helm and the operator render %s differently", name)
			}
		})
	}
}

// The one case the paths differ, by design: a new key set to exactly its
// default next to a legacy key. The operator can see the new key was set.
func TestOperatorNewKeyAtDefaultWins(t *testing.T) {
	c := loadChart(t)
	vals := parse(t, "controller: {jobRetentionPolicy: delete}\nargs: {controllerJobRetentionPolicy: retain}\n")
	translated, err := NewTranslator(chartAliases(t)).Translate(context.Background(), cr(vals))
	if err != nil {
		t.Fatal(err)
	}
	r, err := golden.Render(c, translated)
	if err != nil {
		t.Fatal(err)
	}
	d := r.Find("Deployment", "")
	if len(d) != 1 || !strings.Contains(d[0].Content, "--job-retention-policy=delete") {
		t.Errorf("the operator did not keep the new key's value:\n%v", d)
	}
}

// The defaults in aliases.yaml must be the chart's defaults, or a legacy key
// would override a value the user never touched (or never apply).
func TestAliasDefaultsMatchValues(t *testing.T) {
	c := loadChart(t)
	for _, a := range chartAliases(t) {
		got, ok := lookupPath(c.Values, strings.Split(a.Key, "."))
		if !ok {
			t.Errorf("%s: new key %s not in values.yaml", a.Legacy, a.Key)
			continue
		}
		gj, _ := yaml.Marshal(got)
		wj, _ := yaml.Marshal(a.Default)
		if !bytes.Equal(gj, wj) {
			t.Errorf("%s -> %s: alias default %s, values.yaml %s", a.Legacy, a.Key, wj, gj)
		}
	}
}
