package imagecache

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/controller/fakeapi"
	"github.com/kubefledged/kube-fledged/internal/jobs"
)

// consumePatch is the JSON patch that removes the refresh annotation if it
// still has value: the test op makes the removal conditional, in one write.
func consumePatch(value string) string {
	return `[{"op":"test","path":"/metadata/annotations/kubefledged.io~1refresh-imagecache","value":"` + value + `"},` +
		`{"op":"remove","path":"/metadata/annotations/kubefledged.io~1refresh-imagecache"}]`
}

// An operation removes at its end only the on-demand annotation it acted
// on, and only with the value it had when it started: one set (or set
// again, with another value) while it ran is a new request and must lead to
// another refresh, not be swallowed. The removal is conditional on the API
// server's side (a JSON patch test op), which the fake client applies; a
// failed test comes back Invalid and is no error for the operation.
func TestAnnotationsDuringAnOperation(t *testing.T) {
	const img = "nginx:1.25"
	type patch struct {
		value   string
		invalid bool // the test op failed: the annotation had changed
	}
	tests := []struct {
		name string
		// before brings the cache to where its first operation is due.
		before    func(h *harness)
		firstKind string
		// during is what the user does while the first operation runs.
		during func(c *v1alpha2.ImageCache)
		// left is the annotation the first operation leaves, nil: none.
		left        *string
		wantPatches []patch
	}{{
		name:      "set during a create that started without it",
		firstKind: v1alpha2.ImageCacheReasonImageCacheCreate,
		during:    func(c *v1alpha2.ImageCache) { c.Annotations = map[string]string{v1alpha2.RefreshAnnotation: "now"} },
		left:      ptr.To("now"),
		// The create removes nothing; the refresh it leads to removes "now".
		wantPatches: []patch{{value: "now"}},
	}, {
		name:        "set again with another value during a refresh",
		before:      requested(v1alpha2.RefreshAnnotation, "1"),
		firstKind:   v1alpha2.ImageCacheReasonImageCacheRefresh,
		during:      func(c *v1alpha2.ImageCache) { c.Annotations[v1alpha2.RefreshAnnotation] = "2" },
		left:        ptr.To("2"),
		wantPatches: []patch{{value: "1", invalid: true}, {value: "2"}},
	}, {
		name:        "removed by the user during a refresh",
		before:      requested(v1alpha2.RefreshAnnotation, "1"),
		firstKind:   v1alpha2.ImageCacheReasonImageCacheRefresh,
		during:      func(c *v1alpha2.ImageCache) { delete(c.Annotations, v1alpha2.RefreshAnnotation) },
		wantPatches: []patch{{value: "1", invalid: true}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			h := newHarness(t, Config{Granularity: jobs.PerImage}, node("a"), imageCache("c", img))
			if tt.before != nil {
				tt.before(h)
			}
			h.settleDown("c")
			g.Expect(h.running("c")).To(BeTrue())
			g.Expect(h.status("c").Reason).To(Equal(tt.firstKind))

			h.edit("c", tt.during)
			h.complete("c", img, "a")
			_, err := h.step("c")
			g.Expect(err).NotTo(HaveOccurred(), "a changed annotation is no error")

			g.Expect(h.running("c")).To(BeFalse())
			c := h.cache("c")
			g.Expect(outcomeOf(c.Status)).To(Equal(outcome{v1alpha2.ImageCacheActionStatusSucceeded, tt.firstKind,
				v1alpha2.ImageCacheMessageImagesPulledSuccessfully}))
			if tt.left == nil {
				g.Expect(c.Annotations).NotTo(HaveKey(v1alpha2.RefreshAnnotation))
			} else {
				g.Expect(c.Annotations).To(HaveKeyWithValue(v1alpha2.RefreshAnnotation, *tt.left))
				h.settleDown("c")
				g.Expect(outcomeOf(h.status("c"))).To(Equal(outcome{v1alpha2.ImageCacheActionStatusProcessing,
					v1alpha2.ImageCacheReasonImageCacheRefresh, v1alpha2.ImageCacheMessageRefreshingCache}), "the request left runs")
				h.complete("c", img, "a")
			}
			h.settleDown("c")

			c = h.cache("c")
			g.Expect(h.running("c")).To(BeFalse(), "no further operation")
			g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
			g.Expect(c.Annotations).NotTo(HaveKey(v1alpha2.RefreshAnnotation))
			var got []patch
			for _, a := range h.writesOf("patch", "imagecaches") {
				g.Expect(a.Err == nil || apierrors.IsInvalid(a.Err)).To(BeTrue(), "%v", a.Err)
				var ops []struct{ Op, Value string }
				g.Expect(json.Unmarshal([]byte(a.Body), &ops)).To(Succeed())
				g.Expect(ops).NotTo(BeEmpty())
				g.Expect(a.Body).To(Equal(consumePatch(ops[0].Value)))
				got = append(got, patch{value: ops[0].Value, invalid: apierrors.IsInvalid(a.Err)})
			}
			g.Expect(got).To(Equal(tt.wantPatches))
		})
	}
}

// The harness's premise for the test above: the fake client applies a JSON
// patch's test op (a mismatch changes nothing) but answers it with
// json-patch's own error, where the API server answers 422 Invalid;
// fakeapi.AsAPIServer restores the API server's answer. Should a later fake
// client answer Invalid itself, the first check fails and AsAPIServer can go.
func TestFakeClientJSONPatchTest(t *testing.T) {
	g := NewWithT(t)
	c := imageCache("c", "nginx:1.25")
	c.Annotations = map[string]string{v1alpha2.RefreshAnnotation: "2"}
	h := newHarness(t, Config{Granularity: jobs.PerImage}, c)
	p := client.RawPatch(types.JSONPatchType, []byte(consumePatch("1")))

	err := h.api.Patch(h.ctx, h.cache("c"), p)
	g.Expect(err).To(HaveOccurred())
	g.Expect(apierrors.IsInvalid(err)).To(BeFalse(), "the fake's own answer: %v", err)
	g.Expect(apierrors.IsInvalid(fakeapi.AsAPIServer(p, err))).To(BeTrue())
	g.Expect(h.cache("c").Annotations).To(HaveKeyWithValue(v1alpha2.RefreshAnnotation, "2"))

	g.Expect(h.api.Patch(h.ctx, h.cache("c"), client.RawPatch(types.JSONPatchType, []byte(consumePatch("2"))))).To(Succeed())
	g.Expect(h.cache("c").Annotations).NotTo(HaveKey(v1alpha2.RefreshAnnotation))
}
