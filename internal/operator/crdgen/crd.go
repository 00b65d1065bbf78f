// Package crdgen builds the KubeFledged CRD from the chart's values.schema.json.
// It runs at build time (hack/gen-kubefledged-crd, from `make manifests`),
// never in the operator, so it is a package of its own: the operator's binary
// carries none of it, and the operator's package holds only what runs.
package crdgen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubefledged/kube-fledged/internal/operator"
)

// KubeFledgedCRD builds the KubeFledged CRD from the chart's
// values.schema.json, so that the API server refuses at admission what Helm
// would refuse at install (jobRetentionPolicy: keep, a duration without a
// unit, an unknown key), and kubectl explain documents the values.
func KubeFledgedCRD(valuesSchema []byte) (*apiextensionsv1.CustomResourceDefinition, error) {
	spec, err := SpecSchema(valuesSchema)
	if err != nil {
		return nil, err
	}
	// A CR without spec installs the defaults; helm-operator-plugins needs
	// a spec object to put its override values in.
	spec.Default = &apiextensionsv1.JSON{Raw: []byte("{}")}

	str := func(desc string) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "string", Description: desc}
	}
	status := apiextensionsv1.JSONSchemaProps{
		Type:        "object",
		Description: "What the operator last did, written by helm-operator-plugins; it rewrites the whole status.",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"conditions": {
				Type:        "array",
				Description: "Initialized, Deployed, ReleaseFailed, Irreconcilable and Paused.",
				Nullable:    true,
				Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
					Type:     "object",
					Required: []string{"type", "status"},
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"type":    str("Type of the condition."),
						"status":  {Type: "string", Description: "True, False or Unknown.", Enum: enumJSON("True", "False", "Unknown")},
						"reason":  str("One word on why."),
						"message": str("Details; for Deployed, the chart's notes."),
						// The reconciler leaves it unset (null) on some paths and
						// never writes observedGeneration.
						"lastTransitionTime": {Type: "string", Format: "date-time", Nullable: true},
					},
				}},
			},
			"deployedRelease": {
				Type:        "object",
				Description: "The Helm release the operator deployed.",
				Nullable:    true,
				Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"name":     str("Release name, the custom resource's name."),
					"manifest": str("Rendered manifest of the release."),
				},
			},
		},
	}

	deployed := `.status.conditions[?(@.type=="Deployed")]`
	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "kubefledgeds." + operator.KubeFledgedGVK.Group,
		},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: operator.KubeFledgedGVK.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Kind:     operator.KubeFledgedGVK.Kind,
				ListKind: operator.KubeFledgedGVK.Kind + "List",
				Plural:   "kubefledgeds",
				Singular: "kubefledged",
				// Not "kubefledged": kubectl expands a category before it
				// looks up a resource by that name, so a category spelt like
				// this kind's singular made `kubectl get kubefledged` list
				// the ImageCaches too.
				Categories: []string{"kube-fledged"},
			},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name:    operator.KubeFledgedGVK.Version,
				Served:  true,
				Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{
					Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
				},
				AdditionalPrinterColumns: []apiextensionsv1.CustomResourceColumnDefinition{
					{Name: "Deployed", Type: "string", JSONPath: deployed + ".status", Description: "Whether the release is deployed"},
					{Name: "Reason", Type: "string", JSONPath: deployed + ".reason", Description: "Why it is or is not"},
					{Name: "Failed", Type: "string", JSONPath: `.status.conditions[?(@.type=="ReleaseFailed")].status`, Priority: 1, Description: "Whether the last install or upgrade failed"},
					{Name: "Release", Type: "string", JSONPath: ".status.deployedRelease.name", Priority: 1, Description: "Helm release name"},
					{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
				},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type:        "object",
					Description: "KubeFledged installs kube-fledged: its spec holds the kube-fledged chart's values (helm show values), including the original kube-fledged chart's keys.",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"apiVersion": str("APIVersion of the object."),
						"kind":       str("Kind of the object."),
						"metadata":   {Type: "object"},
						"spec":       *spec,
						"status":     status,
					},
				}},
			}},
		},
	}, nil
}

func enumJSON(vals ...string) []apiextensionsv1.JSON {
	out := make([]apiextensionsv1.JSON, 0, len(vals))
	for _, v := range vals {
		b, _ := json.Marshal(v)
		out = append(out, apiextensionsv1.JSON{Raw: b})
	}
	return out
}

// SpecSchema turns a Helm values JSON schema into a structural CRD schema.
//
// The rewrite keeps JSON schema's meaning of unknown fields:
// "additionalProperties: false" is the CRD's default (unknown fields are
// refused by strict field validation and pruned otherwise), so it goes; an
// object that says "additionalProperties: true", or nothing, keeps them; "default" goes, so that the operator
// sees only what users set (the chart applies its defaults); "$schema" and
// "title" have no place in a CRD. Any other keyword a CRD does not know is an
// error, to be fixed in the chart's schema rather than lost here.
func SpecSchema(valuesSchema []byte) (*apiextensionsv1.JSONSchemaProps, error) {
	var root map[string]interface{}
	if err := json.Unmarshal(valuesSchema, &root); err != nil {
		return nil, fmt.Errorf("values schema: %w", err)
	}
	if err := structural(root, "spec"); err != nil {
		return nil, err
	}
	b, err := json.Marshal(root)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	props := &apiextensionsv1.JSONSchemaProps{}
	if err := dec.Decode(props); err != nil {
		return nil, fmt.Errorf("values schema has a keyword a CRD does not support: %w", err)
	}
	// The decoder is strict at the top only (items and additionalProperties
	// decode themselves), so compare the round trip to catch what was lost.
	back, err := json.Marshal(props)
	if err != nil {
		return nil, err
	}
	var got, want interface{}
	if err := json.Unmarshal(back, &got); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &want); err != nil {
		return nil, err
	}
	if p := firstDifference(want, got, "spec"); p != "" {
		return nil, fmt.Errorf("values schema: %s uses a keyword a CRD does not support", p)
	}
	return props, nil
}

// firstDifference names the first path where a and b differ, or "".
func firstDifference(a, b interface{}, path string) string {
	am, aok := a.(map[string]interface{})
	bm, bok := b.(map[string]interface{})
	if aok && bok {
		keys := make([]string, 0, len(am)+len(bm))
		for k := range am {
			keys = append(keys, k)
		}
		for k := range bm {
			if _, ok := am[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			if p := firstDifference(am[k], bm[k], path+"."+k); p != "" {
				return p
			}
		}
		return ""
	}
	al, aok := a.([]interface{})
	bl, bok := b.([]interface{})
	if aok && bok {
		if len(al) != len(bl) {
			return path
		}
		for i := range al {
			if p := firstDifference(al[i], bl[i], fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
		return ""
	}
	if fmt.Sprintf("%#v", a) != fmt.Sprintf("%#v", b) {
		return path
	}
	return ""
}

func structural(node map[string]interface{}, path string) error {
	if c, ok := node["$comment"].(string); ok && strings.HasPrefix(c, kubeTypeMarker) {
		typed, err := kubeTypeSchema(strings.TrimPrefix(c, kubeTypeMarker))
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		desc := node["description"]
		clear(node)
		for k, v := range typed {
			node[k] = v
		}
		if desc != nil {
			node["description"] = desc
		}
	}
	delete(node, "$comment")
	delete(node, "$schema")
	delete(node, "$id")
	delete(node, "title")
	delete(node, "default")
	delete(node, "examples")

	// ["string", "null"] is how JSON schema says nullable.
	if types, ok := node["type"].([]interface{}); ok {
		var kept []string
		for _, t := range types {
			if t == "null" {
				node["nullable"] = true
				continue
			}
			kept = append(kept, fmt.Sprint(t))
		}
		if len(kept) != 1 {
			return fmt.Errorf("%s: a CRD field has one type, not %v", path, types)
		}
		node["type"] = kept[0]
	}

	props, hasProps := node["properties"].(map[string]interface{})
	switch ap := node["additionalProperties"].(type) {
	case nil:
		// JSON schema allows unknown fields unless told otherwise.
		if node["type"] == "object" {
			node["x-kubernetes-preserve-unknown-fields"] = true
		}
	case bool:
		delete(node, "additionalProperties")
		if ap {
			node["x-kubernetes-preserve-unknown-fields"] = true
		}
	case map[string]interface{}:
		if hasProps {
			return fmt.Errorf("%s: a CRD object has either properties or an additionalProperties schema, not both", path)
		}
		if err := structural(ap, path+"[*]"); err != nil {
			return err
		}
	}

	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		child, ok := props[k].(map[string]interface{})
		if !ok {
			return fmt.Errorf("%s.%s: not a schema object", path, k)
		}
		if err := structural(child, path+"."+k); err != nil {
			return err
		}
	}
	if items, ok := node["items"].(map[string]interface{}); ok {
		if err := structural(items, path+"[]"); err != nil {
			return err
		}
	}
	for _, kw := range []string{"anyOf", "oneOf", "allOf"} {
		list, _ := node[kw].([]interface{})
		for i, e := range list {
			child, ok := e.(map[string]interface{})
			if !ok {
				return fmt.Errorf("%s.%s[%d]: not a schema object", path, kw, i)
			}
			if err := structural(child, fmt.Sprintf("%s.%s[%d]", path, kw, i)); err != nil {
				return err
			}
		}
	}
	return nil
}
