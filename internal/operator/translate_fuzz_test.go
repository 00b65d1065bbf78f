package operator

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubefledged/kube-fledged/test/golden"
)

// FuzzTranslate feeds arbitrary JSON as the spec of a KubeFledged resource
// to the values translator. The spec is whatever a user (or the API server's
// preserve-unknown-fields subtrees) let through, so the translator must never
// panic, never touch the resource it reads (the reconciler writes that object
// back), and only ever drop legacy keys whose new key is set: dropping
// anything else would silently change the release.
func FuzzTranslate(f *testing.F) {
	c, err := golden.LoadChart()
	if err != nil {
		f.Fatal(err)
	}
	aliases, err := Aliases(c)
	if err != nil {
		f.Fatal(err)
	}
	tr := NewTranslator(aliases)

	for _, seed := range []string{
		`{}`, `null`, `[]`, `"spec"`, `1`, `true`,
		`{"controller":{"jobRetentionPolicy":"delete"},"args":{"controllerJobRetentionPolicy":"retain","webhookServerPort":443}}`,
		`{"controllerReplicaCount":2,"replicaCount":3,"controller":{"replicaCount":1}}`,
		`{"controller":null,"args":{"controllerLogLevel":"DEBUG"}}`,
		`{"controller":{"jobRetentionPolicy":null},"args":{"controllerJobRetentionPolicy":"retain"}}`,
		`{"args":"not a map","controller":{"imagePullPolicy":"Always"}}`,
		`{"controller":"not a map","args":{"controllerImagePullPolicy":"Always"}}`,
		`{"webhook":{"enabled":false,"configuration":{"create":false}},"webhookServer":{"enable":true},"validatingWebhook":{"create":true}}`,
		`{"image":{"repository":"r","kubefledgedControllerRepository":"x"}}`,
		`{"image":{"kubefledgedControllerRepository":"x"}}`,
		`{"a.b":{"c":1},"args.controllerLogLevel":"x","controller.logLevel":"y"}`,
		`{"secret":{"name":"s"},"webhook":{"secretName":""}}`,
		`{"args":{"controllerJobRetentionPolicy":"retain"},"controller":{"jobRetentionPolicy":[]}}`,
		`{"controller":{"extraArgs":["--x"],"extraEnv":[{"name":"A","value":"B"}]},"args":[1,2,{"x":null}]}`,
	} {
		f.Add([]byte(seed))
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		var spec interface{}
		if err := json.Unmarshal(data, &spec); err != nil {
			return
		}
		obj := &unstructured.Unstructured{Object: map[string]interface{}{"spec": spec}}
		obj.SetGroupVersionKind(KubeFledgedGVK)
		obj.SetNamespace("ns")
		obj.SetName("kf")
		before := runtime.DeepCopyJSONValue(obj.Object).(map[string]interface{})

		got, err := tr.Translate(context.Background(), obj)
		if !reflect.DeepEqual(obj.Object, before) {
			t.Fatalf("the translator changed the resource:\n before %v\n after  %v", before, obj.Object)
		}
		specMap, isMap := spec.(map[string]interface{})
		if spec != nil && !isMap {
			if err == nil {
				t.Fatalf("a %T spec was translated to %v, want an error", spec, got)
			}
			if !strings.Contains(err.Error(), "not an object") {
				t.Fatalf("unclear error for a %T spec: %v", spec, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("translating %s: %v", data, err)
		}
		if specMap == nil {
			specMap = map[string]interface{}{}
		}
		out := map[string]interface{}(got)

		// Every legacy key whose new key is set is gone.
		for _, a := range aliases {
			if v, ok := lookupPath(specMap, strings.Split(a.Key, ".")); ok && v != nil {
				if _, still := lookupPath(out, strings.Split(a.Legacy, ".")); still {
					t.Fatalf("%s is set, but legacy %s survived: %v", a.Key, a.Legacy, got)
				}
			}
		}
		// Nothing else is removed or changed: every leaf of the output is the
		// input's, and every leaf the input had and the output lacks is a
		// dropped legacy key (or inside one).
		var droppable [][]string
		for _, a := range aliases {
			if v, ok := lookupPath(specMap, strings.Split(a.Key, ".")); ok && v != nil {
				droppable = append(droppable, strings.Split(a.Legacy, "."))
			}
		}
		walkLeaves(out, nil, func(path []string, v interface{}) {
			was, ok := lookupPath(specMap, path)
			if m, empty := v.(map[string]interface{}); empty && len(m) == 0 {
				// A map emptied by dropping legacy keys: what it lost is
				// checked below.
				if _, wasMap := was.(map[string]interface{}); ok && wasMap {
					return
				}
			}
			if !ok || !reflect.DeepEqual(was, v) {
				t.Fatalf("output %q = %v is not the input's (%v, present %v)", path, v, was, ok)
			}
		})
		walkLeaves(specMap, nil, func(path []string, v interface{}) {
			if _, ok := lookupPath(out, path); ok {
				return
			}
			for _, legacy := range droppable {
				if under(path, legacy) {
					return
				}
			}
			t.Fatalf("input %q = %v was dropped, and it is no legacy key whose new key is set", path, v)
		})

		// Translating what came out changes nothing more.
		again, err := tr.Translate(context.Background(), &unstructured.Unstructured{Object: map[string]interface{}{
			"spec": runtime.DeepCopyJSONValue(out),
		}})
		if err != nil {
			t.Fatalf("translating the output again: %v", err)
		}
		if !reflect.DeepEqual(map[string]interface{}(again), out) {
			t.Fatalf("not idempotent:\n once  %v\n twice %v", got, again)
		}
	})
}

// walkLeaves calls fn with the path (as segments: fuzzed keys may contain
// dots, or be empty) of every leaf of v; an empty map is a leaf.
func walkLeaves(v interface{}, path []string, fn func(path []string, v interface{})) {
	m, ok := v.(map[string]interface{})
	if !ok || len(m) == 0 {
		fn(path, v)
		return
	}
	for k, child := range m {
		walkLeaves(child, append(append([]string{}, path...), k), fn)
	}
}

// under tells whether path is prefix or lies below it.
func under(path, prefix []string) bool {
	return len(path) >= len(prefix) && reflect.DeepEqual(path[:len(prefix)], prefix)
}
