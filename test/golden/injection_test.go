package golden

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp/syntax"
	"slices"
	"sort"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/kubefledged/kube-fledged/internal/operator"
)

// injectedDoc is the object a value tries to add to the release. Through the
// operator, whatever a KubeFledged's spec adds is applied with the
// operator's rights, so a value that gets one in is a privilege escalation.
const injectedDoc = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: injected\n  namespace: kube-fledged\n"

// shortInjection fits the 63 characters of nameOverride, whose label is
// not truncated below that.
const shortInjection = "x\n---\n{apiVersion: v1,kind: Secret,metadata: {name: injected}}"

// injectionBase turns on every feature that prints a value only when it is
// on, so that each value below reaches a template.
const injectionBase = `
controller:
  # The startup-taint alert and the controller's extra toleration.
  nodeStartupTaint: kubefledged.io/caching:NoSchedule
  # The PodDisruptionBudget (minAvailable) needs more than one replica.
  replicaCount: 2
webhook:
  # caBundle is printed only in external mode without cert-manager.
  certManagement: external
  caBundle: Y2E=
metrics:
  service: {enabled: true}
  serviceMonitor: {enabled: true}
prometheusRule: {enabled: true}
grafanaDashboard: {enabled: true}
`

// injectionBaseUnder replaces injectionBase for the values under a path,
// where the base would keep them from being printed.
var injectionBaseUnder = map[string]string{
	// The Certificate is rendered only with cert-manager, its issuerRef's
	// fields only when issuerRef is set; renewBefore is also printed in the
	// certificate alert's text.
	"webhook.certManager": `
webhook:
  certManager: {enabled: true, issuerRef: {name: ca}}
prometheusRule: {enabled: true}
`,
}

// notPrinted are the values no template prints, so that their not
// changing the rendering is no sign of a base that keeps them from one:
// Helm's global, and what the original chart's objects may hold that
// nothing reads.
var notPrinted = func() []string {
	out := []string{"global.<key>", "global." + probeKey, "validatingWebhookCABundle"}
	for _, legacy := range []string{"args", "webhookServer", "validatingWebhook", "webhookService", "secret"} {
		out = append(out, legacy+".<key>", legacy+"."+probeKey)
	}
	return out
}()

// probeKey is the key given where a map takes any key.
const probeKey = "kubefledged.io/probe"

// slot is a place in the values where a string can be given: the value at
// path, or (key) a key of the map at path.
type slot struct {
	path []string // "[]" is an array's first item
	key  bool
}

func (s slot) String() string {
	p := strings.Join(s.path, ".")
	if s.key {
		return p + ".<key>"
	}
	return p
}

// stringSlots walks a values schema for every place a string can be given:
// string (and string-or-something) fields, array items and map values, and
// the keys and values of maps that take any key.
func stringSlots(node map[string]interface{}, path []string, out *[]slot) {
	types := map[string]bool{}
	switch t := node["type"].(type) {
	case string:
		types[t] = true
	case []interface{}:
		for _, e := range t {
			types[fmt.Sprint(e)] = true
		}
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		alts, _ := node[kw].([]interface{})
		for _, a := range alts {
			if am, ok := a.(map[string]interface{}); ok {
				if t, ok := am["type"].(string); ok {
					types[t] = true
				}
			}
		}
	}
	at := func(p ...string) []string { return append(append([]string{}, path...), p...) }
	if types["string"] {
		*out = append(*out, slot{path: at()})
	}
	if types["object"] {
		props, _ := node["properties"].(map[string]interface{})
		names := make([]string, 0, len(props))
		for k := range props {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			stringSlots(props[k].(map[string]interface{}), at(k), out)
		}
		switch ap := node["additionalProperties"].(type) {
		case map[string]interface{}:
			*out = append(*out, slot{path: at(), key: true})
			stringSlots(ap, at(probeKey), out)
		case nil, bool:
			if ap == nil || ap == true {
				*out = append(*out, slot{path: at(), key: true}, slot{path: at(probeKey)})
			}
		}
	}
	if types["array"] {
		if items, ok := node["items"].(map[string]interface{}); ok {
			stringSlots(items, at("[]"), out)
		}
	}
}

// schemaAt is the schema of the value at path, or nil where the schema says
// nothing of it.
func schemaAt(node map[string]interface{}, path []string) map[string]interface{} {
	for _, p := range path {
		if node == nil {
			return nil
		}
		if p == "[]" {
			node, _ = node["items"].(map[string]interface{})
			continue
		}
		props, _ := node["properties"].(map[string]interface{})
		if child, ok := props[p].(map[string]interface{}); ok {
			node = child
			continue
		}
		node, _ = node["additionalProperties"].(map[string]interface{})
	}
	return node
}

// build is the values holding leaf at path: maps and one-item arrays on the
// way, with the string fields an array item requires filled in, so that
// only leaf can be what the schema refuses.
func build(schema map[string]interface{}, path []string, leaf interface{}) interface{} {
	if len(path) == 0 {
		return leaf
	}
	if path[0] == "[]" {
		items := schemaAt(schema, path[:1])
		item := build(items, path[1:], leaf)
		if m, ok := item.(map[string]interface{}); ok && items != nil {
			req, _ := items["required"].([]interface{})
			for _, r := range req {
				if _, set := m[r.(string)]; !set {
					m[r.(string)] = "x"
				}
			}
		}
		return []interface{}{item}
	}
	return map[string]interface{}{path[0]: build(schemaAt(schema, path[:1]), path[1:], leaf)}
}

// merge puts over onto a copy of base: maps merge, anything else replaces.
func merge(base, over map[string]interface{}) map[string]interface{} {
	out := runtime.DeepCopyJSONValue(base).(map[string]interface{})
	for k, v := range over {
		bm, ok1 := out[k].(map[string]interface{})
		om, ok2 := v.(map[string]interface{})
		if ok1 && ok2 {
			out[k] = merge(bm, om)
			continue
		}
		out[k] = v
	}
	return out
}

// injections are the strings a slot is tried with, in groups: a short one;
// the object after a start that the field's pattern may want (a path, a
// URL, its default), with and without a block scalar that swallows the rest
// of the template, the rest of its line included, so that it still parses;
// and the object before an end the pattern may want. The starts only get a
// value past a pattern, so a group stops at the first value the schema
// takes: that one reached the templates.
func injections(def interface{}) [][]string {
	starts := []string{"x", "/x", "https://example.com/x"}
	if s, ok := def.(string); ok && s != "" && !slices.Contains(starts, s) {
		starts = append(starts, s)
	}
	forms := []func(string) string{
		func(s string) string { return s + "\n---\n" + injectedDoc },
		func(s string) string { return s + "\n---\n" + injectedDoc + "data:\n  swallowed: |1\n   " },
		func(s string) string { return injectedDoc + "---\n" + s },
	}
	out := [][]string{{shortInjection}}
	for _, f := range forms {
		var group []string
		for _, s := range starts {
			group = append(group, f(s))
		}
		out = append(out, group)
	}
	return out
}

// objectSet is the kind, namespace and name of every object rendered, hooks
// included; a document that does not parse is named by its text.
func objectSet(r Rendered) []string {
	var out []string
	for _, m := range r.All() {
		var head struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(m.Content), &head); err != nil {
			out = append(out, fmt.Sprintf("unparsable %s: %v", m.Name, err))
			continue
		}
		out = append(out, fmt.Sprintf("%s %s/%s", head.Kind, head.Metadata.Namespace, head.Metadata.Name))
	}
	sort.Strings(out)
	return out
}

// crdValidator validates a KubeFledged's spec as the API server does with
// the generated CRD (config/crd/bases), the one the operator's bundle ships.
func crdValidator(t *testing.T) func(spec map[string]interface{}) error {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(ChartDir(), "..", "..", "config", "crd", "bases", "charts.helm.kubefledged.io_kubefledgeds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(raw, crd); err != nil {
		t.Fatal(err)
	}
	s := runtime.NewScheme()
	if err := apiextensions.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	in := &apiextensions.CustomResourceDefinition{}
	if err := s.Convert(crd, in, nil); err != nil {
		t.Fatal(err)
	}
	// The internal form keeps a schema shared by all versions at the top.
	root := in.Spec.Validation
	if v := in.Spec.Versions[0].Schema; v != nil {
		root = v
	}
	v, _, err := apiservervalidation.NewSchemaValidator(root.OpenAPIV3Schema)
	if err != nil {
		t.Fatal(err)
	}
	return func(spec map[string]interface{}) error {
		obj := map[string]interface{}{
			"apiVersion": operator.KubeFledgedGVK.GroupVersion().String(),
			"kind":       operator.KubeFledgedGVK.Kind,
			"metadata":   map[string]interface{}{"name": ReleaseName, "namespace": Namespace},
			"spec":       wholeNumbers(spec),
		}
		if errs := apiservervalidation.ValidateCustomResource(field.NewPath(""), obj, v); len(errs) > 0 {
			return errs.ToAggregate()
		}
		return nil
	}
}

// wholeNumbers makes whole numbers int64, as the API server's decoder does.
func wholeNumbers(v interface{}) interface{} {
	switch t := v.(type) {
	case map[string]interface{}:
		out := map[string]interface{}{}
		for k, e := range t {
			out[k] = wholeNumbers(e)
		}
		return out
	case []interface{}:
		out := make([]interface{}, len(t))
		for i, e := range t {
			out[i] = wholeNumbers(e)
		}
		return out
	case float64:
		if t == float64(int64(t)) {
			return int64(t)
		}
	}
	return v
}

// isSchemaRefusal tells Helm's values validation apart from a template
// that failed: only the first is a refusal here.
func isSchemaRefusal(err error) bool {
	return err != nil && strings.Contains(err.Error(), "values don't meet the specifications of the schema")
}

// Chart values cannot add objects to a release. Every place the schema lets
// a string in is given one that carries a document separator and an
// object; each must be refused by the schema, or render exactly the objects
// the chart renders without it. The same through the operator: the API
// server admits the KubeFledged against the generated CRD (which must
// refuse whatever the schema does), the operator translates its spec and
// Helm renders it.
func TestValuesCannotInjectObjects(t *testing.T) {
	c := loadChart(t)
	raw, err := os.ReadFile(filepath.Join(ChartDir(), "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]interface{}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	var slots []slot
	stringSlots(schema, nil, &slots)
	if len(slots) < 100 {
		t.Fatalf("only %d string fields found in the schema", len(slots))
	}
	aliases, err := operator.Aliases(c)
	if err != nil {
		t.Fatal(err)
	}
	translator := operator.NewTranslator(aliases)
	admit := crdValidator(t)

	type baseline struct {
		vals    map[string]interface{}
		text    string
		objects []string
	}
	baselines := map[string]baseline{}
	baseFor := func(t *testing.T, s slot) baseline {
		key, src := "", injectionBase
		for prefix, b := range injectionBaseUnder {
			if strings.HasPrefix(strings.Join(s.path, ".")+".", prefix+".") {
				key, src = prefix, b
			}
		}
		if b, ok := baselines[key]; ok {
			return b
		}
		vals := map[string]interface{}{}
		if err := yaml.Unmarshal([]byte(src), &vals); err != nil {
			t.Fatal(err)
		}
		r, err := Render(c, vals)
		if err != nil {
			t.Fatalf("base values for %s: %v", s, err)
		}
		b := baseline{vals: vals, text: r.String(), objects: objectSet(r)}
		baselines[key] = b
		return b
	}

	// problem says what is wrong with one rendering, "" when the values were
	// refused or rendered the base's objects.
	problem := func(b baseline, r Rendered, err error) string {
		if isSchemaRefusal(err) {
			return ""
		}
		if err != nil {
			return fmt.Sprintf("not refused by the schema, and the chart failed: %v", err)
		}
		if got := objectSet(r); strings.Join(got, "\n") != strings.Join(b.objects, "\n") {
			return fmt.Sprintf("rendered objects\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(b.objects, "\n  "))
		}
		return ""
	}
	translate := func(vals map[string]interface{}) (map[string]interface{}, error) {
		obj := &unstructured.Unstructured{Object: map[string]interface{}{"spec": runtime.DeepCopyJSONValue(vals)}}
		obj.SetGroupVersionKind(operator.KubeFledgedGVK)
		obj.SetNamespace(Namespace)
		obj.SetName(ReleaseName)
		return translator.Translate(context.Background(), obj)
	}

	// What each value did, for the log: an object of its own in the
	// release, or a template it broke.
	injected, broke := map[string]bool{}, map[string]bool{}
	note := func(s slot, r Rendered, err error) {
		if err != nil {
			broke[s.String()] = true
			return
		}
		for _, o := range objectSet(r) {
			if strings.HasSuffix(o, "/injected") {
				injected[s.String()] = true
			}
		}
	}
	for _, s := range slots {
		t.Run(s.String(), func(t *testing.T) {
			b := baseFor(t, s)
			def, _ := lookup(c.Values, s.path)
			accepted, printed := false, false
			// try checks one value both ways and tells whether the schema took
			// it.
			try := func(v string) bool {
				var leaf interface{} = v
				if s.key {
					leaf = map[string]interface{}{v: "x"}
				}
				vals := merge(b.vals, build(schema, s.path, leaf).(map[string]interface{}))
				r, err := Render(c, vals)
				taken := !isSchemaRefusal(err)
				if p := problem(b, r, err); p != "" {
					note(s, r, err)
					t.Errorf("helm, %q: %s", v, p)
				} else if err == nil {
					accepted = true
					printed = printed || r.String() != b.text
				}
				if admit(vals) != nil {
					return taken
				}
				if !taken {
					t.Errorf("%q: refused by the chart's schema but admitted by the KubeFledged CRD", v)
				}
				spec, err := translate(vals)
				if err != nil {
					t.Errorf("operator, %q: %v", v, err)
					return taken
				}
				// The translator only drops legacy keys: where it dropped
				// none, the operator renders what helm just did.
				if reflect.DeepEqual(spec, vals) {
					return taken
				}
				r, err = Render(c, spec)
				if p := problem(b, r, err); p != "" {
					note(s, r, err)
					t.Errorf("operator, %q: %s", v, p)
				}
				return taken
			}
			for _, group := range injections(def) {
				for _, v := range group {
					if try(v) {
						break
					}
				}
			}
			// A value the schema takes must reach a template, or this proves
			// nothing of the templates.
			if accepted && !printed && !slices.Contains(notPrinted, s.String()) {
				t.Errorf("accepted but no template printed it: turn on what prints it in injectionBase(Under), or list it in notPrinted")
			}
		})
	}
	for what, m := range map[string]map[string]bool{"added an object": injected, "broke a template": broke} {
		if len(m) == 0 {
			continue
		}
		var names []string
		for n := range m {
			names = append(names, n)
		}
		sort.Strings(names)
		t.Logf("%d values %s: %s", len(names), what, strings.Join(names, ", "))
	}
}

// lookup is the value at path in chart values, if any.
func lookup(vals map[string]interface{}, path []string) (interface{}, bool) {
	var cur interface{} = vals
	for _, p := range path {
		m, ok := cur.(map[string]interface{})
		if !ok {
			return nil, false
		}
		if cur, ok = m[p]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// Every pattern of the values schema matches whole values (^...$) and no
// part of it takes a control character: no line break (\n, \r, NEL) that
// would end a scalar, where a template has to print a value unquoted
// (inside the alerts' block scalars) or a quote is forgotten. Go's RE2 is
// what Helm and the API server both compile them with: its $ without the m
// flag is the end of the text, but . takes \r and [^...] takes \n unless
// they are excluded.
func TestSchemaPatternsAreAnchoredSingleLine(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(ChartDir(), "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema interface{}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	n := 0
	var walk func(v interface{}, path string)
	walk = func(v interface{}, path string) {
		switch t := v.(type) {
		case map[string]interface{}:
			for k, e := range t {
				walk(e, path+"/"+k)
			}
		case []interface{}:
			for i, e := range t {
				walk(e, fmt.Sprintf("%s/%d", path, i))
			}
		}
		m, _ := v.(map[string]interface{})
		p, ok := m["pattern"].(string)
		if !ok {
			return
		}
		n++
		re, err := syntax.Parse(p, syntax.Perl)
		if err != nil {
			t.Errorf("%s: %q: %v", path, p, err)
			return
		}
		if !anchored(re, true) || !anchored(re, false) {
			t.Errorf("%s: %q does not match whole values: anchor it, ^(...)$", path, p)
		}
		if r, ok := controlIn(re); ok {
			t.Errorf("%s: %q takes %U", path, p, r)
		}
	}
	walk(schema, "")
	if n < 40 {
		t.Fatalf("only %d patterns found", n)
	}
}

// anchored tells whether every match of re starts at the start of the text
// (start) or ends at its end.
func anchored(re *syntax.Regexp, start bool) bool {
	switch re.Op {
	case syntax.OpBeginText:
		return start
	case syntax.OpEndText:
		return !start
	case syntax.OpCapture:
		return anchored(re.Sub[0], start)
	case syntax.OpConcat:
		if len(re.Sub) == 0 {
			return false
		}
		if start {
			return anchored(re.Sub[0], true)
		}
		return anchored(re.Sub[len(re.Sub)-1], false)
	case syntax.OpAlternate:
		for _, s := range re.Sub {
			if !anchored(s, start) {
				return false
			}
		}
		return true
	}
	return false
}

// controlIn returns a control character (C0, DEL or C1) some part of re
// matches.
func controlIn(re *syntax.Regexp) (rune, bool) {
	bad := [][2]rune{{0x00, 0x1f}, {0x7f, 0x9f}}
	in := func(lo, hi rune) (rune, bool) {
		for _, b := range bad {
			if lo <= b[1] && hi >= b[0] {
				return max(lo, b[0]), true
			}
		}
		return 0, false
	}
	switch re.Op {
	case syntax.OpAnyChar:
		return '\n', true
	case syntax.OpAnyCharNotNL:
		return '\r', true
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if c, ok := in(r, r); ok {
				return c, true
			}
		}
	case syntax.OpCharClass:
		for i := 0; i+1 < len(re.Rune); i += 2 {
			if c, ok := in(re.Rune[i], re.Rune[i+1]); ok {
				return c, true
			}
		}
	}
	for _, s := range re.Sub {
		if c, ok := controlIn(s); ok {
			return c, true
		}
	}
	return 0, false
}
