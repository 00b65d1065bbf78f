package imagecache

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/plan"
)

// A node that joins gets the cache's images in an operation of its own, on
// it alone. Its end adds to what the cache's last operation left: a failure
// on another node stays in status.failures (its pair has not run again), so
// the cache stays Failed with the original's message; and it does not move
// refreshedTime, from which the periodic refresh counts, or a cluster whose
// nodes come and go would postpone the refresh of every other node.
func TestNewNodeMerge(t *testing.T) {
	const img = "nginx:1.25"
	failureOn := func(n string) v1alpha2.NodeReasonMessage {
		return v1alpha2.NodeReasonMessage{Node: n, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}
	}
	tests := []struct {
		name             string
		aFails, bFails   bool
		wantPrior, want  v1alpha2.ImageCacheActionStatus
		wantMessage      string
		wantFailures     v1alpha2.NodeReasonMessageList
		wantCounts       v1alpha2.Counts
		wantEndEventType string
	}{{
		name: "a failure on an earlier node stays", aFails: true,
		wantPrior: v1alpha2.ImageCacheActionStatusFailed, want: v1alpha2.ImageCacheActionStatusFailed,
		wantMessage:  v1alpha2.ImageCacheMessageImagePullFailedForSomeImages,
		wantFailures: v1alpha2.NodeReasonMessageList{failureOn("a")},
		wantCounts:   v1alpha2.Counts{Desired: 2, Succeeded: 1, Failed: 1}, wantEndEventType: "Warning",
	}, {
		name:      "all succeeded, the new node too",
		wantPrior: v1alpha2.ImageCacheActionStatusSucceeded, want: v1alpha2.ImageCacheActionStatusSucceeded,
		wantMessage: v1alpha2.ImageCacheMessageImagesPulledSuccessfully,
		wantCounts:  v1alpha2.Counts{Desired: 2, Succeeded: 2}, wantEndEventType: "Normal",
	}, {
		name: "all succeeded, the new node fails", bFails: true,
		wantPrior: v1alpha2.ImageCacheActionStatusSucceeded, want: v1alpha2.ImageCacheActionStatusFailed,
		wantMessage:  v1alpha2.ImageCacheMessageImagePullFailedForSomeImages,
		wantFailures: v1alpha2.NodeReasonMessageList{failureOn("b")},
		wantCounts:   v1alpha2.Counts{Desired: 2, Succeeded: 1, Failed: 1}, wantEndEventType: "Warning",
	}}
	finish := func(h *harness, node string, fails bool) {
		if fails {
			h.fail("c", img, node)
		} else {
			h.complete("c", img, node)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			h := newHarness(t, Config{Granularity: jobs.PerImage, RefreshEvery: time.Hour}, node("a"), imageCache("c", img))
			h.settleDown("c")
			finish(h, "a", tt.aFails)
			h.settleDown("c")
			prior := h.status("c")
			g.Expect(prior.Status).To(Equal(tt.wantPrior))
			g.Expect(prior.RefreshedTime.Time).To(BeTemporally("==", epoch))

			h.advance(30 * time.Minute)
			h.addNode(node("b", h.joinedNow))
			h.events()
			h.settleDown("c")

			g.Expect(h.status("c").Reason).To(Equal(v1alpha2.ImageCacheReasonImageCacheNewNodes))
			g.Expect(h.jobs("c")).To(HaveExactElements(HaveField("Annotations", HaveKeyWithValue("kubefledged.io/node", "b"))),
				"a Job on the new node only")
			finish(h, "b", tt.bFails)
			h.settleDown("c")

			st := h.status("c")
			g.Expect(outcomeOf(st)).To(Equal(outcome{tt.want, v1alpha2.ImageCacheReasonImageCacheNewNodes, tt.wantMessage}))
			if tt.wantFailures == nil {
				g.Expect(st.Failures).To(BeEmpty())
			} else {
				g.Expect(st.Failures).To(Equal(map[string]v1alpha2.NodeReasonMessageList{img: tt.wantFailures}))
			}
			g.Expect(*st.Counts).To(Equal(tt.wantCounts))
			g.Expect(st.CompletionTime.Time).To(BeTemporally("==", epoch.Add(30*time.Minute)))
			g.Expect(st.RefreshedTime.Time).To(BeTemporally("==", epoch), "a new-node operation is no refresh")
			g.Expect(st.ObservedGeneration).To(Equal(prior.ObservedGeneration))
			g.Expect(st.ProcessedSpec).To(Equal(prior.ProcessedSpec))
			g.Expect(h.events()).To(HaveExactElements(
				"Normal ImageCacheNewNodes Images are being pulled on to new nodes: b",
				tt.wantEndEventType+" ImageCacheNewNodes "+tt.wantMessage))

			// The periodic refresh comes an hour after the create, not
			// after the new-node operation.
			timing := func(now time.Time) plan.Timing {
				return plan.Timing{Now: now, Started: epoch, RefreshEvery: time.Hour}
			}
			cache := h.cache("c")
			_, due, after := plan.Due(cache, timing(epoch.Add(time.Hour-time.Second)))
			g.Expect(due).To(BeFalse())
			g.Expect(after).To(Equal(time.Second))
			kind, due, _ := plan.Due(cache, timing(epoch.Add(time.Hour)))
			g.Expect(due).To(BeTrue())
			g.Expect(kind).To(Equal(plan.Refresh))

			h.advance(30 * time.Minute)
			_, err := h.step("c")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(outcomeOf(h.status("c"))).To(Equal(outcome{v1alpha2.ImageCacheActionStatusProcessing,
				v1alpha2.ImageCacheReasonImageCacheRefresh, v1alpha2.ImageCacheMessageRefreshingCache}))
		})
	}
}
