package cachestatus

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/results"
)

// This file changes a status in memory only; write.go writes it. Both
// users of the package need these: the reconciler for every operation, the
// start-up clean-up for Abort.

// ProgressOf is done/desired: pairs pulled (or deleted) or already there,
// of those on eligible nodes.
func ProgressOf(c v1alpha2.Counts) string {
	return fmt.Sprintf("%d/%d", c.Succeeded+c.AlreadyPresent, c.Desired)
}

// Abort sets the original's aborted status on a cache, for a transition
// to write.
func Abort(cache *v1alpha2.ImageCache, now time.Time) {
	cache.Status.Status = v1alpha2.ImageCacheActionStatusAborted
	cache.Status.Reason = v1alpha2.ImageCacheReasonImagePullAborted
	cache.Status.Message = v1alpha2.ImageCacheMessagePullingAborted
	t := metav1.NewTime(now)
	cache.Status.CompletionTime = &t
	SetConditions(&cache.Status, false, "Aborted", v1alpha2.ImageCacheMessagePullingAborted, cache.Generation)
}

// SetConditions sets Progressing, and Ready from the status: Ready stays as
// it was while an operation runs, and is Unknown until the first one ends,
// so that its last transition is when the images were last found all in
// place or not (the failing-since metric and its alert count from it).
// generation is that of the spec the operation acts on, which an edit made
// meanwhile has moved past.
func SetConditions(st *v1alpha2.ImageCacheStatus, running bool, reason, message string, generation int64) {
	if running {
		setProgressing(st, true, reason, message, generation)
		if meta.FindStatusCondition(st.Conditions, v1alpha2.ConditionReady) == nil {
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha2.ConditionReady, Status: metav1.ConditionUnknown,
				Reason: reason, Message: "the first operation is running", ObservedGeneration: generation})
		}
		return
	}
	SetEndConditions(st, reason, message, results.Ready(st.Status, FailureCount(st), nil, message), generation)
}

// SetEndConditions sets the conditions of an operation's end: Progressing
// False, and Ready as results.Ready judged it.
func SetEndConditions(st *v1alpha2.ImageCacheStatus, reason, message string, ready results.Readiness, generation int64) {
	setProgressing(st, false, reason, message, generation)
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha2.ConditionReady, Status: ready.Status,
		Reason: ready.Reason, Message: ready.Message, ObservedGeneration: generation})
}

func setProgressing(st *v1alpha2.ImageCacheStatus, running bool, reason, message string, generation int64) {
	prog := metav1.Condition{Type: v1alpha2.ConditionProgressing, Status: metav1.ConditionFalse, Reason: reason, Message: message, ObservedGeneration: generation}
	if running {
		prog.Status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&st.Conditions, prog)
}

// FailureCount counts the failures of a status, those left out for size
// included.
func FailureCount(st *v1alpha2.ImageCacheStatus) int {
	n := int(st.FailuresOmitted)
	for _, l := range st.Failures {
		n += len(l)
	}
	return n
}

// SetPins records what a cache that pins holds pinned at an operation's
// end: status.pins, counts.pinned and the Pinned condition (False when a
// pin failed: the images are cached, only not protected from the kubelet's
// image garbage collection, so Ready does not change). pinned counts every
// pair, those of images left out of pins.images for size too. nil pins is
// a cache that does not pin (any more): all three go.
func SetPins(st *v1alpha2.ImageCacheStatus, pins *v1alpha2.PinStatus, pinned int32, generation int64) {
	st.Pins = pins
	if pins == nil {
		if st.Counts != nil {
			st.Counts.Pinned = 0
		}
		meta.RemoveStatusCondition(&st.Conditions, v1alpha2.ConditionPinned)
		return
	}
	if st.Counts == nil {
		st.Counts = &v1alpha2.Counts{}
	}
	st.Counts.Pinned = pinned
	c := metav1.Condition{Type: v1alpha2.ConditionPinned, Status: metav1.ConditionTrue, Reason: v1alpha2.PinnedReasonPinned,
		Message: fmt.Sprintf("%d (image, node) pairs pinned", pinned), ObservedGeneration: generation}
	if failed := int32(len(pins.Failures)) + pins.FailuresOmitted; failed > 0 {
		c.Status, c.Reason = metav1.ConditionFalse, v1alpha2.PinnedReasonPinFailed
		c.Message = fmt.Sprintf("%d (image, node) pairs could not be pinned (see status.pins.failures); %d pinned", failed, pinned)
	}
	meta.SetStatusCondition(&st.Conditions, c)
}
