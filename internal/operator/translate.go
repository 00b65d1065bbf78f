package operator

import (
	"context"
	"fmt"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/operator-framework/helm-operator-plugins/pkg/values"
)

// AliasesFile is the chart file listing the original chart's value keys and
// the keys that replace them.
const AliasesFile = "aliases.yaml"

// Alias is one entry of the chart's aliases.yaml. The chart's templates do
// the folding of Legacy into Key; the operator only needs the pairs.
type Alias struct {
	Legacy  string                 `json:"legacy"`
	Key     string                 `json:"key"`
	Default interface{}            `json:"default"`
	Lower   bool                   `json:"lower,omitempty"`
	Map     map[string]interface{} `json:"map,omitempty"`
	Ignore  string                 `json:"ignore,omitempty"`
}

// Aliases reads aliases.yaml from a loaded chart; a chart without one has
// none.
func Aliases(c *chart.Chart) ([]Alias, error) {
	for _, f := range c.Files {
		if f.Name != AliasesFile {
			continue
		}
		var as []Alias
		if err := yaml.UnmarshalStrict(f.Data, &as); err != nil {
			return nil, fmt.Errorf("chart %s: %s: %w", c.Name(), AliasesFile, err)
		}
		for i, a := range as {
			if a.Legacy == "" || a.Key == "" {
				return nil, fmt.Errorf("chart %s: %s: entry %d needs legacy and key", c.Name(), AliasesFile, i+1)
			}
		}
		return as, nil
	}
	return nil, nil
}

// NewTranslator returns the values translator of a chart with aliases.
//
// The chart alone cannot tell a new key the user set to its default from one
// left at its default, because Helm merges values.yaml in first; the custom
// resource's spec can. So where the spec sets a new key, the translator drops
// the legacy keys that feed it, and the new key wins exactly as documented.
// Everything else, the folding of legacy keys included, stays with the
// templates, so `helm install` and the operator render the same release.
func NewTranslator(aliases []Alias) values.Translator {
	return values.TranslatorFunc(func(_ context.Context, obj *unstructured.Unstructured) (chartutil.Values, error) {
		spec, err := specOf(obj)
		if err != nil {
			return nil, err
		}
		for _, a := range aliases {
			if v, ok := lookupPath(spec, strings.Split(a.Key, ".")); ok && v != nil {
				deletePath(spec, strings.Split(a.Legacy, "."))
			}
		}
		return spec, nil
	})
}

// specOf returns a copy of the spec: the translator must not change the
// object the reconciler later writes status through.
func specOf(obj *unstructured.Unstructured) (map[string]interface{}, error) {
	if obj == nil || obj.Object == nil {
		return nil, fmt.Errorf("no object to translate")
	}
	raw, ok := obj.Object["spec"]
	if !ok || raw == nil {
		return map[string]interface{}{}, nil
	}
	spec, ok := raw.(map[string]interface{})
	if !ok {
		return nil, fmt.Errorf("spec of %s/%s is a %T, not an object", obj.GetNamespace(), obj.GetName(), raw)
	}
	return copyMap(spec), nil
}

// copyMap copies maps and slices and shares the leaves, which are immutable
// scalars here (whatever the override parser put in, too).
func copyMap(m map[string]interface{}) map[string]interface{} {
	out := make(map[string]interface{}, len(m))
	for k, v := range m {
		out[k] = copyValue(v)
	}
	return out
}

func copyValue(v interface{}) interface{} {
	switch t := v.(type) {
	case map[string]interface{}:
		return copyMap(t)
	case []interface{}:
		out := make([]interface{}, len(t))
		for i, e := range t {
			out[i] = copyValue(e)
		}
		return out
	default:
		return v
	}
}

// lookupPath and deletePath take a key's path as segments, so that the fuzz
// test can name keys that contain dots.
func lookupPath(v interface{}, path []string) (interface{}, bool) {
	cur := v
	for _, p := range path {
		mm, ok := cur.(map[string]interface{})
		if !ok {
			return nil, false
		}
		if cur, ok = mm[p]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func deletePath(m map[string]interface{}, path []string) {
	cur := m
	for _, p := range path[:len(path)-1] {
		next, ok := cur[p].(map[string]interface{})
		if !ok {
			return
		}
		cur = next
	}
	delete(cur, path[len(path)-1])
}
