package crdgen

import (
	"fmt"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// kubeTypeMarker, as a "$comment" of a values.schema.json field, says the
// field is passed through to a pod spec as this Kubernetes type. Helm ignores
// comments; the KubeFledged CRD gets the type's full schema in its place, so
// that an unknown or mistyped field inside (an affinity term with a typo)
// is refused when the resource is written, not dropped silently when the
// Deployment is.
const kubeTypeMarker = "kubefledged:type="

// kubeTypes are the types a marker may name.
var kubeTypes = map[string]reflect.Type{
	"core/v1.Affinity":                 reflect.TypeOf(corev1.Affinity{}),
	"core/v1.Toleration":               reflect.TypeOf(corev1.Toleration{}),
	"core/v1.TopologySpreadConstraint": reflect.TypeOf(corev1.TopologySpreadConstraint{}),
	"core/v1.ResourceRequirements":     reflect.TypeOf(corev1.ResourceRequirements{}),
	"core/v1.SecurityContext":          reflect.TypeOf(corev1.SecurityContext{}),
	"core/v1.PodSecurityContext":       reflect.TypeOf(corev1.PodSecurityContext{}),
}

// kubeTypeSchema is the JSON schema of a marked type, in the form the values
// schema uses: closed objects say additionalProperties false.
func kubeTypeSchema(name string) (map[string]interface{}, error) {
	t, ok := kubeTypes[name]
	if !ok {
		return nil, fmt.Errorf("unknown type %q in a %s marker", name, kubeTypeMarker)
	}
	return schemaOf(t, map[reflect.Type]bool{})
}

// quantityPattern is the grammar of a resource quantity (1, 0.5, 100m,
// 128Mi, 1e3), as the API server parses it.
const quantityPattern = `^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`

var (
	quantityType = reflect.TypeOf(resource.Quantity{})
	intOrStrType = reflect.TypeOf(intstr.IntOrString{})
	timeType     = reflect.TypeOf(metav1.Time{})
)

func schemaOf(t reflect.Type, open map[reflect.Type]bool) (map[string]interface{}, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case quantityType, intOrStrType:
		s := map[string]interface{}{
			"x-kubernetes-int-or-string": true,
			"anyOf":                      []interface{}{map[string]interface{}{"type": "integer"}, map[string]interface{}{"type": "string"}},
		}
		if t == quantityType {
			s["pattern"] = quantityPattern
		}
		return s, nil
	case timeType:
		return map[string]interface{}{"type": "string", "format": "date-time"}, nil
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]interface{}{"type": "string"}, nil
	case reflect.Bool:
		return map[string]interface{}{"type": "boolean"}, nil
	case reflect.Int32, reflect.Int64, reflect.Int:
		return map[string]interface{}{"type": "integer"}, nil
	case reflect.Float32, reflect.Float64:
		return map[string]interface{}{"type": "number"}, nil
	case reflect.Slice:
		items, err := schemaOf(t.Elem(), open)
		if err != nil {
			return nil, err
		}
		return map[string]interface{}{"type": "array", "items": items}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("%s: map keys must be strings", t)
		}
		values, err := schemaOf(t.Elem(), open)
		if err != nil {
			return nil, err
		}
		return map[string]interface{}{"type": "object", "additionalProperties": values}, nil
	case reflect.Struct:
		if open[t] {
			return nil, fmt.Errorf("%s refers to itself", t)
		}
		open[t] = true
		defer delete(open, t)
		props := map[string]interface{}{}
		if err := structFields(t, props, open); err != nil {
			return nil, err
		}
		return map[string]interface{}{"type": "object", "properties": props, "additionalProperties": false}, nil
	}
	return nil, fmt.Errorf("%s: no schema for kind %s", t, t.Kind())
}

// structFields adds the JSON fields of a struct, those of inlined structs
// included, as its encoding/json form names them.
func structFields(t reflect.Type, props map[string]interface{}, open map[reflect.Type]bool) error {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" && (f.Anonymous || strings.Contains(opts, "inline")) {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if err := structFields(ft, props, open); err != nil {
				return err
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		s, err := schemaOf(f.Type, open)
		if err != nil {
			return fmt.Errorf("%s.%s: %w", t.Name(), f.Name, err)
		}
		props[name] = s
	}
	return nil
}
