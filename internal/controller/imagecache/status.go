package imagecache

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/results"
)

// MaxFailures bounds the entries of status.failures: on a large cluster an
// image failing everywhere would otherwise outgrow the object. The count of
// what was left out goes to status.failuresOmitted.
const MaxFailures = 200

// progress is done/desired: pairs pulled (or deleted) or already there, of
// those on eligible nodes.
func progress(c v1alpha2.Counts) string {
	return fmt.Sprintf("%d/%d", c.Succeeded+c.AlreadyPresent, c.Desired)
}

// writeProgress writes the counts when they changed, at most once per
// StatusInterval per cache; it returns how long to wait before a held-back
// write is due. A merge patch of just these fields needs no resourceVersion:
// during an operation the controller alone writes the status.
func (r *Reconciler) writeProgress(ctx context.Context, cache *v1alpha2.ImageCache, op *operation) (time.Duration, error) {
	if op.counts == op.written {
		return 0, nil
	}
	if wait := op.lastWrite.Add(r.Config.StatusInterval).Sub(r.Clock.Now()); wait > 0 {
		return wait, nil
	}
	body, err := json.Marshal(map[string]any{"status": map[string]any{"counts": op.counts, "progress": progress(op.counts)}})
	if err != nil {
		return 0, err
	}
	target := &v1alpha2.ImageCache{ObjectMeta: metav1.ObjectMeta{Namespace: cache.Namespace, Name: cache.Name}}
	if err := r.Client.Status().Patch(ctx, target, client.RawPatch(types.MergePatchType, body)); err != nil {
		return 0, client.IgnoreNotFound(err)
	}
	op.written, op.lastWrite = op.counts, r.Clock.Now()
	return 0, nil
}

// setConditions sets Progressing, and Ready from the status: Ready stays as
// it was while an operation runs, and is Unknown until the first one ends,
// so that its last transition is when the images were last found all in
// place or not (the failing-since metric and its alert count from it).
// generation is that of the spec the operation acts on, which an edit made
// meanwhile has moved past.
func setConditions(cache *v1alpha2.ImageCache, running bool, reason, message string, generation int64) {
	setStatusConditions(&cache.Status, running, reason, message, generation)
}

func setStatusConditions(st *v1alpha2.ImageCacheStatus, running bool, reason, message string, generation int64) {
	if running {
		setProgressing(st, true, reason, message, generation)
		if meta.FindStatusCondition(st.Conditions, v1alpha2.ConditionReady) == nil {
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha2.ConditionReady, Status: metav1.ConditionUnknown,
				Reason: reason, Message: "the first operation is running", ObservedGeneration: generation})
		}
		return
	}
	setEndConditions(st, reason, message, results.Ready(st.Status, failureCount(st), nil, message), generation)
}

// setEndConditions sets the conditions of an operation's end: Progressing
// False, and Ready as results.Ready judged it.
func setEndConditions(st *v1alpha2.ImageCacheStatus, reason, message string, ready results.Readiness, generation int64) {
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

// failureCount counts the failures of a status, those left out for size
// included.
func failureCount(st *v1alpha2.ImageCacheStatus) int {
	n := int(st.FailuresOmitted)
	for _, l := range st.Failures {
		n += len(l)
	}
	return n
}

// boundFailures keeps at most limit node entries, taking images in turn so
// that every failing image shows while there is room, and returns how many
// were left out.
func boundFailures(f map[string]v1alpha2.NodeReasonMessageList, limit int) (map[string]v1alpha2.NodeReasonMessageList, int32) {
	total := 0
	for _, l := range f {
		total += len(l)
	}
	if total <= limit {
		return f, 0
	}
	images := make([]string, 0, len(f))
	for img := range f {
		images = append(images, img)
	}
	sort.Strings(images)
	var out map[string]v1alpha2.NodeReasonMessageList
	kept := 0
	for round := 0; kept < limit; round++ {
		progressed := false
		for _, img := range images {
			if l := f[img]; round < len(l) && kept < limit {
				if out == nil {
					out = map[string]v1alpha2.NodeReasonMessageList{}
				}
				out[img] = append(out[img], l[round])
				kept++
				progressed = true
			}
		}
		if !progressed {
			break
		}
	}
	return out, int32(total - kept)
}
