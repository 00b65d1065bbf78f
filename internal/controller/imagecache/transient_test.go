package imagecache

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/results"
)

const busy = "reg.example/busy:1"

var rateLimited = fmt.Sprintf(`rpc error: code = Unknown desc = failed to pull and unpack image "%s": failed to resolve reference "%s": unexpected status from HEAD request to https://reg.example/v2/busy/manifests/1: 429 Too Many Requests`, busy, busy)

// pullJobOf is the Job that pulls image on node a at either granularity.
func (h *harness) pullJobOf(g jobs.Granularity, cache, image string) *batchv1.Job {
	if g == jobs.PerNode {
		return h.nodeJob(cache, "a")
	}
	return h.job(cache, image, "a")
}

// A registry that rate limits is retried by the kubelet: its pair stays open
// until it pulls, while an image that does not exist fails at once, at
// either granularity.
func TestTransientPullErrorsAreWaitedOn(t *testing.T) {
	for _, g := range []jobs.Granularity{jobs.PerNode, jobs.PerImage} {
		t.Run(g.String(), func(t *testing.T) {
			gm := NewWithT(t)
			h := newHarness(t, Config{Granularity: g, Deadline: time.Minute}, node("a"), imageCache("c", busy, missing))
			h.settleDown("c")
			failing := map[string]corev1.ContainerState{busy: pullError(rateLimited), missing: pullError(notFound)}
			h.containerStates(h.pullJobOf(g, "c", busy), corev1.PodPending, failing)
			if g == jobs.PerImage {
				h.containerStates(h.pullJobOf(g, "c", missing), corev1.PodPending, failing)
			}
			h.settleDown("c")
			gm.Expect(h.running("c")).To(BeTrue(), "the rate-limited image is still being pulled")
			c := h.r.ops.get(h.req("c").NamespacedName).counts
			gm.Expect([]int32{c.Succeeded, c.Failed}).To(Equal([]int32{0, 1}), "the missing image fails at once, the rate-limited one waits")

			h.advance(30 * time.Second)
			h.containerStates(h.pullJobOf(g, "c", busy), corev1.PodPending, map[string]corev1.ContainerState{busy: pullError(rateLimited)})
			h.settleDown("c")
			gm.Expect(h.running("c")).To(BeTrue(), "still rate limited before the deadline")

			h.advance(20 * time.Second)
			if g == jobs.PerNode {
				h.containerStates(h.pullJobOf(g, "c", busy), corev1.PodRunning, map[string]corev1.ContainerState{busy: pulled(), missing: pullError(notFound)})
			} else {
				h.complete("c", busy, "a")
			}
			h.settleDown("c")
			gm.Expect(h.running("c")).To(BeFalse())
			st := h.status("c")
			gm.Expect([]int32{st.Counts.Succeeded, st.Counts.Failed}).To(Equal([]int32{1, 1}))
			gm.Expect(st.Failures).To(Equal(map[string]v1alpha2.NodeReasonMessageList{missing: {{Node: "a", Reason: "ErrImagePull", Message: notFound}}}))
		})
	}
}

// A registry still failing transiently at the deadline fails its pair then,
// with a reason of its own and the registry's last words.
func TestTransientPullErrorsAtTheDeadline(t *testing.T) {
	for _, g := range []jobs.Granularity{jobs.PerNode, jobs.PerImage} {
		t.Run(g.String(), func(t *testing.T) {
			gm := NewWithT(t)
			h := newHarness(t, Config{Granularity: g, Deadline: time.Minute}, node("a"), imageCache("c", busy))
			h.settleDown("c")
			h.containerStates(h.pullJobOf(g, "c", busy), corev1.PodPending, map[string]corev1.ContainerState{busy: pullError(rateLimited)})
			start := h.clock.Now()
			h.runToEnd("c", 20, nil)
			gm.Expect(h.clock.Now().Sub(start)).To(BeNumerically(">=", time.Minute), "failed only at the deadline")
			st := h.status("c")
			gm.Expect(st.Status).To(Equal(v1alpha2.ImageCacheActionStatusFailed))
			gm.Expect(st.Failures).To(HaveKeyWithValue(busy, HaveExactElements(And(
				HaveField("Node", "a"), HaveField("Reason", results.TransientReason),
				HaveField("Message", HaveSuffix("429 Too Many Requests"))))))
		})
	}
}
