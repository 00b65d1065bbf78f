package imagecache

import (
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/metrics"
)

// failuresIn counts the failure entries of a cache being written.
func failuresIn(obj client.Object) int {
	n := 0
	for _, l := range obj.(*v1alpha2.ImageCache).Status.Failures {
		n += len(l)
	}
	return n
}

// A final status the API server will never take (too large for etcd, or
// for a policy on size) is written again with fewer failures, and
// failuresOmitted counts the rest: a status that cannot be written would
// leave the cache Processing for ever. An error that may pass is retried
// with the status whole.
func TestFinalStatusTooLarge(t *testing.T) {
	images := []string{"img0:1", "img1:1", "img2:1", "img3:1", "img4:1", "img5:1"}
	nodes := []string{"a", "b", "c", "d", "e"}
	const room = 10 // failures the API server takes
	gk := schema.GroupKind{Group: v1alpha2.GroupVersion.Group, Kind: "ImageCache"}
	tooMany := func(err error) func(client.Object) error {
		return func(obj client.Object) error {
			if failuresIn(obj) > room {
				return err
			}
			return nil
		}
	}
	tests := []struct {
		name         string
		fault        fault
		wantFailures int
		wantOmitted  int32
	}{{
		name:         "request entity too large",
		fault:        fault{err: tooMany(apierrors.NewRequestEntityTooLargeError("limit is 3145728"))},
		wantFailures: 7, wantOmitted: 23,
	}, {
		name: "invalid: a policy on the object's size",
		fault: fault{err: tooMany(apierrors.NewInvalid(gk, "c", field.ErrorList{
			field.TooMany(field.NewPath("status", "failures"), 30, room)}))},
		wantFailures: 7, wantOmitted: 23,
	}, {
		name:         "etcd's own limit, an internal error",
		fault:        fault{err: tooMany(apierrors.NewInternalError(errors.New("etcdserver: request is too large")))},
		wantFailures: 7, wantOmitted: 23,
	}, {
		name: "a timeout is retried with every failure",
		fault: fault{n: 1, err: func(obj client.Object) error {
			if failuresIn(obj) == 0 {
				return nil
			}
			return apierrors.NewTimeoutError("request timed out", 1)
		}},
		wantFailures: 30,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			objs := []client.Object{imageCache("c", images...)}
			for _, n := range nodes {
				objs = append(objs, node(n))
			}
			h := newHarness(t, Config{Granularity: jobs.PerImage}, objs...)
			h.inject(fault{verb: "create", resource: "jobs", err: quotaExceeded})
			tt.fault.verb, tt.fault.resource = "update", "imagecaches/status"
			h.inject(tt.fault)

			h.settleDown("c")

			st := h.status("c")
			g.Expect(outcomeOf(st)).To(Equal(outcome{v1alpha2.ImageCacheActionStatusFailed,
				v1alpha2.ImageCacheReasonImageCacheCreate, v1alpha2.ImageCacheMessageImagePullFailedForSomeImages}))
			g.Expect(failuresIn(h.cache("c"))).To(Equal(tt.wantFailures))
			g.Expect(st.FailuresOmitted).To(Equal(tt.wantOmitted))
			g.Expect(st.Counts.Failed).To(Equal(int32(30)), "the counts keep every failure")
			if tt.wantOmitted > 0 {
				g.Expect(st.Failures).To(HaveLen(len(images)), "every failing image still shows")
			}
			detail := v1alpha2.ImageCacheMessageImagePullFailedForSomeImages
			if tt.wantOmitted > 0 {
				detail += fmt.Sprintf(" (%d failures left out of status.failures for size)", tt.wantOmitted)
			}
			g.Expect(condition(st, v1alpha2.ConditionReady).Message).To(Equal(detail))
			g.Expect(h.events()).To(HaveExactElements(
				"Normal ImageCacheCreate "+v1alpha2.ImageCacheMessagePullingImages,
				HavePrefix("Warning JobCreateRefused 30 Job(s) refused by the API server"),
				corev1.EventTypeWarning+" ImageCacheCreate "+detail))
		})
	}
}

// Ready is Unknown while the first operation runs, so that its end is a
// transition: a cache that fails its first operation has not been Ready
// since that end, not since it was created (the failing-since metric, and
// the alert that waits a refresh period from it, read this time).
func TestReadyUnknownUntilTheFirstOperationEnds(t *testing.T) {
	g := NewWithT(t)
	const img = "nginx:1.25"
	h := newHarness(t, Config{Granularity: jobs.PerImage}, node("a"), imageCache("c", img))
	h.settleDown("c")
	ready := condition(h.status("c"), v1alpha2.ConditionReady)
	g.Expect(ready.Status).To(Equal(metav1.ConditionUnknown), "while the first operation runs")
	// Status times have whole seconds: the end must fall in a later one.
	started := ready.LastTransitionTime
	time.Sleep(time.Until(started.Add(time.Second)))
	h.fail("c", img, "a")
	h.settleDown("c")
	ready = condition(h.status("c"), v1alpha2.ConditionReady)
	g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(ready.Reason).To(Equal(string(v1alpha2.ImageCacheActionStatusFailed)))
	g.Expect(ready.LastTransitionTime.After(started.Time)).To(BeTrue(), "Ready turned False at the failure, not at the start")
}

// A cache deleted while its Jobs run gives their pacing slots back, and
// kubefledged_jobs_in_flight follows: otherwise it would show Jobs that
// are gone until some other operation's Job settled.
func TestDeletedCacheEmptiesInFlightGauge(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, Config{Granularity: jobs.PerImage}, node("a"), node("b"), imageCache("c", "nginx:1.27"))
	h.settleDown("c")
	g.Expect(h.jobs("c")).To(HaveLen(2))
	g.Expect(testutil.ToFloat64(metrics.JobsInFlight)).To(Equal(2.0))

	g.Expect(h.api.Delete(h.ctx, h.cache("c"))).To(Succeed())
	_, err := h.step("c")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(h.running("c")).To(BeFalse())
	g.Expect(h.r.limiter.InFlight()).To(BeZero())
	g.Expect(testutil.ToFloat64(metrics.JobsInFlight)).To(BeZero())
}
