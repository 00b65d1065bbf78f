// Package argocd runs the Argo CD health check of ImageCaches
// (docs/argocd/imagecache-health.lua) as Argo CD runs a custom health
// check: with gopher-lua, the interpreter Argo CD embeds, opened with only
// the libraries Argo CD opens for it, on the object as the API serves it.
package argocd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
)

var (
	scriptFile = filepath.Join("..", "..", "docs", "argocd", "imagecache-health.lua")
	docFile    = filepath.Join("..", "..", "docs", "argocd.md")
)

// configKey is where argocd-cm takes a health check: group_kind.
const configKey = "resource.customizations.health.kubefledged.io_ImageCache"

// argoHealth is what Argo CD reads back from a health check.
type argoHealth struct{ status, message string }

// validStatuses are the health codes Argo CD accepts; any other return is
// shown as Unknown with "Lua returned an invalid health status".
var validStatuses = map[string]bool{"Healthy": true, "Progressing": true, "Degraded": true, "Suspended": true, "Missing": true, "Unknown": true}

// toLua turns the object into Lua values as Argo CD does: maps into tables
// keyed by string, lists into sequences from 1, every number a Lua number.
// The object is unstructured, as served: its numbers are int64 or float64.
func toLua(L *lua.LState, v any) lua.LValue {
	switch t := v.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(t)
	case string:
		return lua.LString(t)
	case int64:
		return lua.LNumber(t)
	case float64:
		return lua.LNumber(t)
	case []any:
		tb := L.CreateTable(len(t), 0)
		for _, e := range t {
			tb.Append(toLua(L, e))
		}
		return tb
	case map[string]any:
		tb := L.CreateTable(0, len(t))
		for k, e := range t {
			tb.RawSetH(lua.LString(k), toLua(L, e))
		}
		return tb
	}
	panic(fmt.Sprintf("toLua: %T is no type of an unstructured object", v))
}

// runHealth runs script on obj as Argo CD runs a health check from
// argocd-cm: standard libraries skipped, then package, base and table
// opened (and Argo CD's reduced os, which the script does not use), a
// one-second limit, obj a global, the returned table the answer.
func runHealth(t *testing.T, script string, obj map[string]any) argoHealth {
	t.Helper()
	L := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer L.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.LoadLibName, lua.OpenPackage}, {lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}} {
		if err := L.CallByParam(lua.P{Fn: L.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	L.SetContext(ctx)
	L.SetGlobal("obj", toLua(L, obj))
	if err := L.DoString(script); err != nil {
		t.Fatalf("the health check fails: %v", err)
	}
	ret, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		t.Fatalf("the health check returns %s, not a table", L.Get(-1).Type())
	}
	h := argoHealth{status: lua.LVAsString(ret.RawGetString("status")), message: lua.LVAsString(ret.RawGetString("message"))}
	if !validStatuses[h.status] {
		t.Fatalf("health status %q is not one Argo CD knows", h.status)
	}
	return h
}

// served is the cache as the API serves it to Argo CD: unstructured, with
// int64 numbers.
func served(t *testing.T, c *v1alpha2.ImageCache) map[string]any {
	t.Helper()
	c.APIVersion, c.Kind = v1alpha2.GroupVersion.String(), "ImageCache"
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func script(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(scriptFile)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func imageCache(gen int64, st v1alpha2.ImageCacheStatus) *v1alpha2.ImageCache {
	return &v1alpha2.ImageCache{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", Generation: gen},
		Spec:       v1alpha2.ImageCacheSpec{CacheSpec: []v1alpha2.CacheSpecImages{{Images: []string{"nginx:1.27"}}}},
		Status:     st,
	}
}

func ready(status metav1.ConditionStatus, reason string) []metav1.Condition {
	return []metav1.Condition{{Type: v1alpha2.ConditionReady, Status: status, Reason: reason, LastTransitionTime: metav1.Now()}}
}

func TestHealth(t *testing.T) {
	s := script(t)
	failures := map[string]v1alpha2.NodeReasonMessageList{
		"registry.example/b:2": {{Node: "node-2", Reason: "ImagePullBackOff", Message: "not found"}},
		"registry.example/a:1": {{Node: "node-1", Reason: "ErrImagePull", Message: "denied"}, {Node: "node-3", Reason: "ErrImagePull"}},
	}
	skippedReady := []metav1.Condition{{Type: v1alpha2.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha2.ReadyReasonNodesSkipped,
		Message: "1 selected node(s) do not report every image and got no pull Job: 1 Cordoned (node-3)", LastTransitionTime: metav1.Now()}}
	for _, tt := range []struct {
		name   string
		cache  *v1alpha2.ImageCache
		status string
		says   []string
	}{
		{"no status", imageCache(1, v1alpha2.ImageCacheStatus{}), "Progressing", []string{"first operation"}},
		{"processing", imageCache(1, v1alpha2.ImageCacheStatus{
			Status: v1alpha2.ImageCacheActionStatusProcessing, Reason: v1alpha2.ImageCacheReasonImageCacheCreate, Progress: "950/1000",
		}), "Progressing", []string{"ImageCacheCreate is running (950/1000)"}},
		{"refreshing after a failure", imageCache(1, v1alpha2.ImageCacheStatus{
			Status: v1alpha2.ImageCacheActionStatusProcessing, Reason: v1alpha2.ImageCacheReasonImageCacheRefresh, ObservedGeneration: 1,
			Conditions: ready(metav1.ConditionFalse, string(v1alpha2.ImageCacheActionStatusFailed)),
		}), "Progressing", []string{"ImageCacheRefresh is running", "previous operation Failed"}},
		{"succeeded", imageCache(2, v1alpha2.ImageCacheStatus{
			Status: v1alpha2.ImageCacheActionStatusSucceeded, Message: v1alpha2.ImageCacheMessageImagesPulledSuccessfully, ObservedGeneration: 2,
			Conditions: ready(metav1.ConditionTrue, string(v1alpha2.ImageCacheActionStatusSucceeded)),
		}), "Healthy", []string{v1alpha2.ImageCacheMessageImagesPulledSuccessfully}},
		{"no node matches", imageCache(1, v1alpha2.ImageCacheStatus{
			Status: v1alpha2.ImageCacheActionStatusNoImagesPulledOrDeleted, Message: v1alpha2.ImageCacheMessageNoImagesPulledOrDeleted, ObservedGeneration: 1,
		}), "Healthy", []string{"nodeSelector specified did not match any nodes"}},
		{"succeeded, but a selected node left out lacks the images", imageCache(2, v1alpha2.ImageCacheStatus{
			Status: v1alpha2.ImageCacheActionStatusSucceeded, Message: v1alpha2.ImageCacheMessageImagesPulledSuccessfully, ObservedGeneration: 2,
			Conditions: skippedReady,
		}), "Degraded", []string{"1 Cordoned (node-3)"}},
		{"every node that matched was left out", imageCache(2, v1alpha2.ImageCacheStatus{
			Status: v1alpha2.ImageCacheActionStatusFailed, Message: v1alpha2.ImageCacheMessageImagePullFailedForSomeImages, ObservedGeneration: 2,
			Counts: &v1alpha2.Counts{Skipped: 1}, Conditions: skippedReady,
		}), "Degraded", []string{"got no pull Job: 1 Cordoned (node-3)"}},
		{"refreshing after nodes were left out", imageCache(2, v1alpha2.ImageCacheStatus{
			Status: v1alpha2.ImageCacheActionStatusProcessing, Reason: v1alpha2.ImageCacheReasonImageCacheRefresh, ObservedGeneration: 2,
			Conditions: skippedReady,
		}), "Progressing", []string{"ImageCacheRefresh is running", "left nodes without the images"}},
		{"failed, and nodes left out: the failures lead", imageCache(1, v1alpha2.ImageCacheStatus{
			Status: v1alpha2.ImageCacheActionStatusFailed, Message: v1alpha2.ImageCacheMessageImagePullFailedForSomeImages, ObservedGeneration: 1,
			Counts: &v1alpha2.Counts{Desired: 6, Succeeded: 3, Failed: 3}, Failures: failures,
			Conditions: ready(metav1.ConditionFalse, string(v1alpha2.ImageCacheActionStatusFailed)),
		}), "Degraded", []string{"3 of 6 (image, node) pairs failed"}},
		{"failed", imageCache(1, v1alpha2.ImageCacheStatus{
			Status: v1alpha2.ImageCacheActionStatusFailed, Message: v1alpha2.ImageCacheMessageImagePullFailedForSomeImages, ObservedGeneration: 1,
			Counts:   &v1alpha2.Counts{Desired: 6, Succeeded: 3, Failed: 3},
			Failures: failures,
		}), "Degraded", []string{"Image pull failed for some images", "3 of 6 (image, node) pairs failed",
			"registry.example/a:1 on node-1: ErrImagePull", "(and 1 more images)"}},
		{"failed, as the original wrote it", imageCache(4, v1alpha2.ImageCacheStatus{
			Status: v1alpha2.ImageCacheActionStatusFailed, Message: v1alpha2.ImageCacheMessageImagePullFailedForSomeImages,
			Failures: map[string]v1alpha2.NodeReasonMessageList{"x:1": {{Node: "n", Reason: "Timeout"}}},
		}), "Degraded", []string{"x:1 on n: Timeout"}},
		{"aborted", imageCache(1, v1alpha2.ImageCacheStatus{
			Status: v1alpha2.ImageCacheActionStatusAborted, Message: v1alpha2.ImageCacheMessagePullingAborted, ObservedGeneration: 1, Progress: "2/10",
		}), "Progressing", []string{"Aborted", "runs again (2/10)"}},
		{"edited, not yet acted on", imageCache(3, v1alpha2.ImageCacheStatus{
			Status: v1alpha2.ImageCacheActionStatusSucceeded, ObservedGeneration: 2,
		}), "Progressing", []string{"generation 3 of the spec (status is of 2)"}},
		{"the original's status, generation ahead", imageCache(7, v1alpha2.ImageCacheStatus{
			Status: v1alpha2.ImageCacheActionStatusSucceeded, Message: v1alpha2.ImageCacheMessageImagesPulledSuccessfully,
		}), "Healthy", nil},
		{"a status of the future", imageCache(1, v1alpha2.ImageCacheStatus{Status: "Paused", ObservedGeneration: 1}),
			"Unknown", []string{"Paused"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := runHealth(t, s, served(t, tt.cache))
			if h.status != tt.status {
				t.Errorf("status %q, want %q (message %q)", h.status, tt.status, h.message)
			}
			if h.message == "" {
				t.Error("no message")
			}
			for _, w := range tt.says {
				if !strings.Contains(h.message, w) {
					t.Errorf("message %q does not say %q", h.message, w)
				}
			}
		})
	}
}

// A check that used the string library, which Argo CD does not open for
// custom checks, would fail there: the harness must fail it too.
func TestHarnessHasArgoCDsLibrariesOnly(t *testing.T) {
	L := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer L.Close()
	if err := L.CallByParam(lua.P{Fn: L.NewFunction(lua.OpenBase), NRet: 0, Protect: true}, lua.LString(lua.BaseLibName)); err != nil {
		t.Fatal(err)
	}
	if err := L.DoString(`return string.upper("x")`); err == nil {
		t.Error("string.upper ran without the string library")
	}
}

// docs/argocd.md gives the check in argocd-cm's form; it must be the file
// the tests run, and a ConfigMap whose key Argo CD reads.
func TestDocsCarryTheCheck(t *testing.T) {
	doc, err := os.ReadFile(docFile)
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(doc, -1)
	var cm *struct {
		Kind string            `json:"kind"`
		Data map[string]string `json:"data"`
	}
	for _, b := range blocks {
		if !strings.Contains(string(b[1]), configKey) {
			continue
		}
		cm = &struct {
			Kind string            `json:"kind"`
			Data map[string]string `json:"data"`
		}{}
		if err := yaml.UnmarshalStrict(b[1], cm, yaml.DisallowUnknownFields); err != nil {
			// Only kind and data are read; metadata is allowed.
			if err := yaml.Unmarshal(b[1], cm); err != nil {
				t.Fatal(err)
			}
		}
	}
	if cm == nil || cm.Kind != "ConfigMap" {
		t.Fatalf("%s has no argocd-cm ConfigMap with %s", docFile, configKey)
	}
	if got := cm.Data[configKey]; got != script(t) {
		t.Errorf("%s's check differs from %s: copy the file into the page", docFile, scriptFile)
	}
}
