package imagecache

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
)

// A spec over MaxSpecBytes (stored past an old CRD or with the webhook off)
// is declined before any Job: its final status could never be stored beside
// it in etcd. The decline is final until the spec changes: the cache is
// Failed with the original's message, the reason is in failures["(spec)"]
// and a Warning Event, and later reconciles (a node event, a resync) do
// nothing, rather than write the same status and Event again each time.
func TestSpecTooLarge(t *testing.T) {
	const img = "nginx:1.25"
	huge := strings.Repeat("x", 300<<10)
	tests := []struct {
		name  string
		spec  func(l *v1alpha2.CacheSpecImages)
		later func(h *harness)
	}{{
		name: "huge node selector values",
		spec: func(l *v1alpha2.CacheSpecImages) { l.NodeSelector = map[string]string{"pool": huge} },
	}, {
		name: "huge tolerations, on every node",
		spec: func(l *v1alpha2.CacheSpecImages) {
			l.Tolerations = []corev1.Toleration{{Key: "team", Operator: corev1.TolerationOpEqual, Value: huge}}
		},
	}, {
		name: "huge tolerations, then a node joins",
		spec: func(l *v1alpha2.CacheSpecImages) {
			l.Tolerations = []corev1.Toleration{{Key: "team", Operator: corev1.TolerationOpEqual, Value: huge}}
		},
		later: func(h *harness) {
			h.advance(time.Minute)
			h.addNode(node("b", h.joinedNow))
		},
		// A node joining must not make a declined cache decline again
		// (as a new-node operation) at every reconcile.
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			c := imageCache("c", img)
			tt.spec(&c.Spec.CacheSpec[0])
			h := newHarness(t, Config{Granularity: jobs.PerImage}, node("a"), c)

			_, err := h.step("c")
			g.Expect(err).NotTo(HaveOccurred())

			st := h.status("c")
			why := fmt.Sprintf("the spec is %d KiB, over the limit of 256 KiB: its status could not be stored beside it in etcd; "+
				"split the images over several ImageCaches", specSize(t, &c.Spec)>>10)
			g.Expect(outcomeOf(st)).To(Equal(outcome{v1alpha2.ImageCacheActionStatusFailed,
				v1alpha2.ImageCacheReasonImageCacheCreate, v1alpha2.ImageCacheMessageImagePullFailedForSomeImages}))
			g.Expect(st.Failures).To(Equal(map[string]v1alpha2.NodeReasonMessageList{
				"(spec)": {{Node: "(all nodes)", Reason: "SpecTooLarge", Message: why}}}))
			g.Expect(condition(st, v1alpha2.ConditionReady).Message).To(Equal(why))
			g.Expect(h.events()).To(HaveExactElements("Warning SpecTooLarge " + why))
			g.Expect(h.writes()).To(HaveExactElements(HaveField("String()", "update imagecaches/status/c")))
			g.Expect(h.running("c")).To(BeFalse())

			if tt.later != nil {
				tt.later(h)
			}
			writes := len(h.writes())
			_, err = h.step("c")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(h.writes()[writes:]).To(BeEmpty(), "a declined cache is left alone")
			g.Expect(h.events()).To(BeEmpty())
			g.Expect(h.writesOf("create", "jobs")).To(BeEmpty())
		})
	}
}

func specSize(t *testing.T, spec *v1alpha2.ImageCacheSpec) int {
	t.Helper()
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	return len(raw)
}
