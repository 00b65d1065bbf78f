package crdgen

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/kubefledged/kube-fledged/internal/operator"
	"github.com/kubefledged/kube-fledged/internal/plan"
	"github.com/kubefledged/kube-fledged/test/golden"
)

func chartCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(golden.ChartDir(), "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	crd, err := KubeFledgedCRD(raw)
	if err != nil {
		t.Fatal(err)
	}
	return crd
}

func internalCRD(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) *apiextensions.CustomResourceDefinition {
	t.Helper()
	s := runtime.NewScheme()
	if err := apiextensions.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	out := &apiextensions.CustomResourceDefinition{}
	if err := s.Convert(crd, out, nil); err != nil {
		t.Fatal(err)
	}
	return out
}

// The API server's own CRD validation: structural, no forbidden keywords,
// valid printer columns.
func TestKubeFledgedCRDIsValid(t *testing.T) {
	crd := chartCRD(t)
	// The API server fills storedVersions; validation wants it.
	crd.Status.StoredVersions = []string{operator.KubeFledgedGVK.Version}
	in := internalCRD(t, crd)
	if errs := crdvalidation.ValidateCustomResourceDefinition(context.Background(), in); len(errs) > 0 {
		for _, e := range errs {
			t.Error(e)
		}
	}
}

// specChecker validates a spec the way the API server does on create: the
// schema, plus unknown fields (what kubectl's strict field validation
// refuses and the server would otherwise prune).
type specChecker struct {
	validator  apiservervalidation.SchemaValidator
	structural *structuralschema.Structural
}

func newSpecChecker(t *testing.T) specChecker {
	t.Helper()
	in := internalCRD(t, chartCRD(t))
	// The internal form keeps a schema shared by all versions at the top.
	var root *apiextensions.JSONSchemaProps
	if v := in.Spec.Versions[0].Schema; v != nil {
		root = v.OpenAPIV3Schema
	} else {
		root = in.Spec.Validation.OpenAPIV3Schema
	}
	v, _, err := apiservervalidation.NewSchemaValidator(root)
	if err != nil {
		t.Fatal(err)
	}
	st, err := structuralschema.NewStructural(root)
	if err != nil {
		t.Fatal(err)
	}
	return specChecker{validator: v, structural: st}
}

func (c specChecker) check(spec map[string]interface{}) []string {
	obj := map[string]interface{}{
		"apiVersion": operator.KubeFledgedGVK.GroupVersion().String(),
		"kind":       operator.KubeFledgedGVK.Kind,
		"metadata":   map[string]interface{}{"name": "x", "namespace": "y"},
		"spec":       runtimeJSON(spec),
	}
	var out []string
	for _, e := range apiservervalidation.ValidateCustomResource(field.NewPath(""), obj, c.validator) {
		out = append(out, e.Error())
	}
	for _, p := range pruning.PruneWithOptions(obj, c.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}) {
		out = append(out, "unknown field "+p)
	}
	return out
}

// checkYAML checks a spec written as YAML; one that does not parse is
// refused with the parser's error.
func (c specChecker) checkYAML(spec string) []string {
	m := map[string]interface{}{}
	if err := yaml.Unmarshal([]byte(spec), &m); err != nil {
		return []string{err.Error()}
	}
	return c.check(m)
}

// runtimeJSON makes numbers int64 where whole, as the API server's decoder
// does; the validators reject float64 for integer fields.
func runtimeJSON(v interface{}) interface{} {
	switch t := v.(type) {
	case map[string]interface{}:
		out := map[string]interface{}{}
		for k, e := range t {
			out[k] = runtimeJSON(e)
		}
		return out
	case []interface{}:
		out := make([]interface{}, len(t))
		for i, e := range t {
			out[i] = runtimeJSON(e)
		}
		return out
	case float64:
		if t == float64(int64(t)) {
			return int64(t)
		}
		return t
	default:
		return v
	}
}

// Everything the chart accepts, the CRD accepts: every golden values file,
// the sample CR and the chart's own defaults.
func TestCRDAcceptsWhatTheChartAccepts(t *testing.T) {
	c := newSpecChecker(t)
	files, _ := filepath.Glob(filepath.Join(golden.ChartDir(), "..", "..", "test", "golden", "testdata", "*.values.yaml"))
	files = append(files, filepath.Join(golden.ChartDir(), "values.yaml"))
	if len(files) < 10 {
		t.Fatalf("too few values files: %v", files)
	}
	for _, f := range files {
		vals, err := golden.ReadValues(f)
		if err != nil {
			t.Fatal(err)
		}
		if errs := c.check(vals); len(errs) > 0 {
			t.Errorf("%s refused: %v", filepath.Base(f), errs)
		}
	}
	raw, err := os.ReadFile(filepath.Join(golden.ChartDir(), "..", "..", "config", "samples", "charts_v1alpha2_kubefledged.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sample := map[string]interface{}{}
	if err := yaml.Unmarshal(raw, &sample); err != nil {
		t.Fatal(err)
	}
	if sample["apiVersion"] != operator.KubeFledgedGVK.GroupVersion().String() || sample["kind"] != operator.KubeFledgedGVK.Kind {
		t.Errorf("sample is a %v %v", sample["apiVersion"], sample["kind"])
	}
	if errs := c.check(sample["spec"].(map[string]interface{})); len(errs) > 0 {
		t.Errorf("sample refused: %v", errs)
	}
	chart, err := golden.LoadChart()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := golden.Render(chart, sample["spec"].(map[string]interface{})); err != nil {
		t.Errorf("sample does not render: %v", err)
	}
}

// What the chart refuses at install, the API server refuses at admission,
// naming the field.
func TestCRDRefusesWhatTheChartRefuses(t *testing.T) {
	refuses(t, newSpecChecker(t), []struct{ spec, want string }{
		{"controller: {jobRetentionPolicy: keep}", `spec.controller.jobRetentionPolicy: Unsupported value: "keep": supported values: "delete", "retain"`},
		{"args: {controllerJobRetentionPolicy: keep}", "spec.args.controllerJobRetentionPolicy"},
		{"controller: {imagePullDeadlineDuration: 5 minutes}", "spec.controller.imagePullDeadlineDuration"},
		{"controller: {imagePullPolicy: Never}", "spec.controller.imagePullPolicy"},
		{"controller: {replicaCount: 0}", "spec.controller.replicaCount"},
		{"controller: {replicaCount: two}", "spec.controller.replicaCount"},
		{"controllerReplicaCount: 0", "spec.controllerReplicaCount"},
		{"controller: {logLevel: verbose}", "spec.controller.logLevel"},
		{"webhook: {certManagement: manual}", "spec.webhook.certManagement"},
		{"podDisruptionBudget: {minAvailable: half}", "spec.podDisruptionBudget.minAvailable"},
		{"controler: {replicaCount: 2}", "unknown field spec.controler"},
		{"controller: {jobRetentionPolcy: retain}", "unknown field spec.controller.jobRetentionPolcy"},
		{"controller: {nodeStartupTaint: 'kubefledged.io/caching:Never'}", "spec.controller.nodeStartupTaint"},
		{"controller: {nodeStartupTaintTimeout: ten minutes}", "spec.controller.nodeStartupTaintTimeout"},
	})
}

// The CRD takes a startup taint exactly when the controller's flag does:
// one refused by the flag alone would crash the controller pods that the
// operator installs.
func TestCRDStartupTaintAgreesWithTheFlag(t *testing.T) {
	c := newSpecChecker(t)
	for _, v := range []string{
		"", "kubefledged.io/caching", "kubefledged.io/caching:NoSchedule", "caching:NoExecute", "example.com/warm:PreferNoSchedule",
		"a", "A_b.c-D", "sub.example.com/x",
		"kubefledged.io/caching:noschedule", "kubefledged.io/caching:", "kubefledged.io/caching=true:NoSchedule", ":NoSchedule",
		"Bad Key", "a/b/c", "Example.com/x", "-a", "a-", "kubefledged.io/",
	} {
		_, flagErr := plan.ParseStartupTaint(v)
		errs := c.check(map[string]interface{}{"controller": map[string]interface{}{"nodeStartupTaint": v}})
		if (flagErr == nil) != (len(errs) == 0) {
			t.Errorf("%q: the flag says %v, the CRD %v", v, flagErr, errs)
		}
	}
}

// The pod-level values (affinity, tolerations, topology spread, resources,
// security contexts) carry their Kubernetes types' schemas: a typo inside
// them is refused when the resource is written, where Helm would pass it on
// and the API server drop it from the Deployment.
func TestCRDRefusesBadPodValues(t *testing.T) {
	c := newSpecChecker(t)
	refuses(t, c, []struct{ spec, want string }{
		{"affinity: {bogus: 1}", "unknown field spec.affinity.bogus"},
		{"affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: a, operator: 1}]}]}}}",
			"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator"},
		{"affinity: {podAntiAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 1, podAffinityTerm: {topologyKey: zone, labelSelecter: {}}}]}}",
			"unknown field spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.labelSelecter"},
		{"tolerations: [{key: a, efect: NoSchedule}]", "unknown field spec.tolerations[0].efect"},
		{"tolerations: [{key: a, tolerationSeconds: forever}]", "spec.tolerations[0].tolerationSeconds"},
		{"topologySpreadConstraints: [{maxSkew: 1, skew: 2}]", "unknown field spec.topologySpreadConstraints[0].skew"},
		{"resources: {limits: {memory: lots}}", "spec.resources.limits.memory"},
		{"resources: {limit: {memory: 1Gi}}", "unknown field spec.resources.limit"},
		{"securityContext: {privileged: yes please}", "spec.securityContext.privileged"},
		{"podSecurityContext: {runAsUser: root}", "spec.podSecurityContext.runAsUser"},
	})
	for _, ok := range []string{
		"resources: {limits: {cpu: 500m, memory: 128Mi}, requests: {cpu: 1, memory: 1e6}}",
		"tolerations: [{key: a, operator: Exists, effect: NoExecute, tolerationSeconds: 30}]",
		"affinity: {nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 10, preference: {matchExpressions: [{key: zone, operator: In, values: [a]}]}}]}}",
		"topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: x}}}]",
		"securityContext: {capabilities: {drop: [ALL]}, seccompProfile: {type: RuntimeDefault}}",
	} {
		if errs := c.checkYAML(ok); len(errs) > 0 {
			t.Errorf("%s refused: %v", ok, errs)
		}
	}
}

// refuses checks that each spec is refused with an error naming want.
func refuses(t *testing.T, c specChecker, cases []struct{ spec, want string }) {
	t.Helper()
	for _, tt := range cases {
		errs := c.checkYAML(tt.spec)
		if !strings.Contains(strings.Join(errs, "\n"), tt.want) {
			t.Errorf("%s: got %v, want %q", tt.spec, errs, tt.want)
		}
	}
}

func TestSpecSchemaRewrites(t *testing.T) {
	props, err := SpecSchema([]byte(`{
	  "$schema": "https://json-schema.org/draft/2020-12/schema",
	  "title": "t",
	  "type": "object",
	  "additionalProperties": false,
	  "properties": {
	    "open":   {"type": "object"},
	    "loose":  {"type": "object", "additionalProperties": true, "properties": {"a": {"type": "string", "default": "x"}}},
	    "map":    {"type": "object", "additionalProperties": {"type": "string"}},
	    "maybe":  {"type": ["string", "null"]}
	  }
	}`))
	if err != nil {
		t.Fatal(err)
	}
	if props.AdditionalProperties != nil || props.Title != "" || props.Schema != "" {
		t.Errorf("root not rewritten: %+v", props)
	}
	if p := props.Properties["open"]; p.XPreserveUnknownFields == nil || !*p.XPreserveUnknownFields {
		t.Error("an object without fields must keep unknown fields")
	}
	if p := props.Properties["loose"]; p.XPreserveUnknownFields == nil || p.AdditionalProperties != nil || p.Properties["a"].Default != nil {
		t.Errorf("loose: %+v", p)
	}
	if p := props.Properties["map"]; p.AdditionalProperties == nil || p.AdditionalProperties.Schema.Type != "string" {
		t.Errorf("map: %+v", p)
	}
	if p := props.Properties["maybe"]; p.Type != "string" || !p.Nullable {
		t.Errorf("maybe: %+v", p)
	}
	for name, s := range map[string]string{
		"unknown keyword":  `{"type": "object", "properties": {"a": {"type": "string", "const": "x"}}}`,
		"nested unknown":   `{"type": "array", "items": {"type": "string", "contentEncoding": "base64"}}`,
		"two types":        `{"type": ["string", "integer"]}`,
		"props and schema": `{"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}}`,
		"unknown type":     `{"type": "object", "$comment": "kubefledged:type=core/v1.Pod"}`,
		"not json":         `{`,
	} {
		if _, err := SpecSchema([]byte(s)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
