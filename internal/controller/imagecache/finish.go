package imagecache

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/controller/cachestatus"
	"github.com/kubefledged/kube-fledged/internal/metrics"
	"github.com/kubefledged/kube-fledged/internal/plan"
	"github.com/kubefledged/kube-fledged/internal/results"
)

// finish ends an operation: Jobs are deleted or labelled by the retention
// policy, the annotations it acted on are removed, the final status is
// written and an Event says how it went. Each step is idempotent; any error
// retries the whole of finish with the results fixed in op.final.
func (r *Reconciler) finish(ctx context.Context, cache *v1alpha2.ImageCache, op *operation) (ctrl.Result, error) {
	if err := r.applyRetention(ctx, cache, op); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.consumeAnnotations(ctx, cache, op.consumes); err != nil {
		return ctrl.Result{}, err
	}
	whole, err := r.wholePlan(ctx, op)
	if err != nil {
		return ctrl.Result{}, err
	}
	key := types.NamespacedName{Namespace: cache.Namespace, Name: cache.Name}
	var end ending
	err = r.statusWriter().WriteFinal(ctx, key, op.uid, firstFailureLimit(op, whole), func(st *v1alpha2.ImageCacheStatus, limit int) {
		end = r.finalStatus(st, op, whole, limit)
	})
	if apierrors.IsNotFound(err) {
		r.forget(key)
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("writing the final status: %w", err)
	}
	r.closeOperation(key, op)
	r.announceEnd(ctx, cache, op, end)
	// The status write wakes the cache again; that reconcile schedules the
	// next due operation (a spec edit or an annotation made meanwhile, a
	// periodic refresh).
	return ctrl.Result{}, nil
}

// wholePlan is, for a new-node operation, the cache's pairs on every node
// as it stands: its status describes the whole cache, not the few nodes
// the operation served. nil for any other operation.
func (r *Reconciler) wholePlan(ctx context.Context, op *operation) (*plan.Plan, error) {
	if op.kind != plan.NewNodes {
		return nil, nil
	}
	nodes, err := r.listNodes(ctx)
	if err != nil {
		return nil, err
	}
	p := plan.Build(plan.Input{Op: plan.Refresh, Spec: op.spec, Nodes: nodes.Items, StartupTaint: r.Config.StartupTaint})
	return &p, nil
}

// firstFailureLimit is how many failures the final status may hold at
// first; a new-node operation's are merged with those already there,
// another's with those before it that it did not retry (results.Carry).
func firstFailureLimit(op *operation, whole *plan.Plan) int {
	if whole != nil {
		return cachestatus.MaxFailures
	}
	failures := 0
	for _, l := range op.final.summary.Failures {
		failures += len(l)
	}
	for _, l := range op.priorFailures {
		failures += len(l)
	}
	return failures
}

// closeOperation gives back what the operation held once its end is
// written, and keeps the nodes it covered, from which new nodes are told.
func (r *Reconciler) closeOperation(key types.NamespacedName, op *operation) {
	r.releaseAll(key, op)
	r.limiter.Forget(key)
	r.ops.drop(key)
	r.ops.setCoverage(key, op.uid, r.coverageAfter(key, op))
}

// announceEnd tells the user, by Event, how the operation went, and counts
// and logs it.
func (r *Reconciler) announceEnd(ctx context.Context, cache *v1alpha2.ImageCache, op *operation, end ending) {
	evType := corev1.EventTypeNormal
	if end.status == v1alpha2.ImageCacheActionStatusFailed {
		evType = corev1.EventTypeWarning
	}
	r.Recorder.Event(cache, evType, string(op.kind), end.detail)
	metrics.OperationDuration.WithLabelValues(string(op.kind), string(end.status)).Observe(r.Clock.Since(op.start).Seconds())
	log.FromContext(ctx).Info("operation finished", "id", op.id, "operation", op.kind, "status", end.status,
		"jobs", len(op.table.pairs), "failedImages", len(op.final.summary.Failures), "took", r.Clock.Since(op.start).String())
}

// ending is what an operation's end wrote: the status, and the detail its
// Event and conditions carry.
type ending struct {
	status v1alpha2.ImageCacheActionStatus
	detail string
}

// finalStatus sets the status an operation ends with, keeping at most limit
// failures. A new-node operation adds its results to those before it: the
// failures on other nodes stay until their pairs run again, and the status
// says how the whole cache stands.
func (r *Reconciler) finalStatus(st *v1alpha2.ImageCacheStatus, op *operation, whole *plan.Plan, limit int) ending {
	var e endState
	if whole != nil {
		e = mergedEnd(st, op, whole)
	} else {
		e = ownEnd(op)
	}
	st.Status = e.sum.Status
	st.Reason = string(op.kind)
	st.Message = e.sum.Message
	var dropped int32
	st.Failures, dropped = cachestatus.BoundFailures(e.failures, limit)
	st.FailuresOmitted = e.omitted + dropped
	if op.kind != plan.NewNodes {
		// What the latest deletes left on the nodes; a new-node
		// operation deletes nothing and leaves the record as it was.
		st.Kept, st.KeptOmitted = cachestatus.BoundFailures(e.sum.Kept, cachestatus.MaxFailures)
	}
	now := metav1.NewTime(r.Clock.Now())
	st.CompletionTime = &now
	st.Counts = e.counts.DeepCopy()
	st.Progress = progress(e.counts)
	st.SkippedNodes = e.skipped
	recordProcessed(st, op)
	if op.kind == plan.Create || op.kind == plan.Refresh {
		st.RefreshedTime = &now
	}
	detail := e.sum.Message
	if len(op.unmatched) > 0 {
		detail += ": " + strings.Join(op.unmatched, "; ")
	}
	if dropped > 0 {
		detail += fmt.Sprintf(" (%d failures left out of status.failures for size)", dropped)
	}
	if n := keptPairs(e.sum.Kept); n > 0 {
		detail += fmt.Sprintf("; %d delete(s) kept the image, in use or pinned on the node (status.kept)", n)
	}
	ready := results.Ready(st.Status, cachestatus.FailureCount(st), e.lacking, detail)
	cachestatus.SetEndConditions(st, string(op.kind), detail, ready, op.generation)
	r.pinsAtEnd(st, op)
	return ending{status: e.sum.Status, detail: detail}
}

// endState is how the cache stands at an operation's end, before the
// failures are bounded to what the status can hold.
type endState struct {
	sum      results.Summary
	failures map[string]v1alpha2.NodeReasonMessageList
	omitted  int32
	counts   v1alpha2.Counts
	skipped  []v1alpha2.SkippedNodes
	lacking  map[string]string
}

// ownEnd is the end of an operation that acted on the whole cache. Its
// failures keep those from before on the nodes it left out: it did not
// retry them, and dropping them would be a false green.
func ownEnd(op *operation) endState {
	e := endState{sum: op.final.summary, failures: op.final.summary.Failures, counts: op.counts,
		skipped: skippedNodes(op.skippedNodes), lacking: op.lacking}
	if op.kind != plan.Purge {
		e.failures = results.Carry(op.priorFailures, op.skippedNodes, wantedImages(&op.spec), e.failures)
		if len(e.failures) > 0 && e.sum.Status != v1alpha2.ImageCacheActionStatusFailed {
			e.sum.Status, e.sum.Message = v1alpha2.ImageCacheActionStatusFailed, v1alpha2.ImageCacheMessageImagePullFailedForSomeImages
		}
	}
	return e
}

// mergedEnd is the end of a new-node operation: the failures st holds on
// the nodes it did not serve stay, and whole, the cache on every node,
// gives the counts and the nodes left out.
func mergedEnd(st *v1alpha2.ImageCacheStatus, op *operation, whole *plan.Plan) endState {
	served := map[string]bool{}
	for n := range op.only {
		served[n] = true
	}
	for n := range op.joined {
		served[n] = true
	}
	e := endState{sum: op.final.summary, omitted: st.FailuresOmitted,
		skipped: skippedNodes(whole.SkippedNodes), lacking: whole.Lacking}
	e.failures = mergeFailures(st.Failures, served, e.sum.Failures)
	e.counts = wholeCounts(whole, e.failures, e.omitted)
	e.sum.Status, e.sum.Message = v1alpha2.ImageCacheActionStatusSucceeded, v1alpha2.ImageCacheMessageImagesPulledSuccessfully
	if len(e.failures) > 0 || e.omitted > 0 {
		e.sum.Status, e.sum.Message = v1alpha2.ImageCacheActionStatusFailed, v1alpha2.ImageCacheMessageImagePullFailedForSomeImages
	}
	return e
}

// recordProcessed records what the operation acted on, which the next
// update compares its spec with.
func recordProcessed(st *v1alpha2.ImageCacheStatus, op *operation) {
	switch op.kind {
	case plan.Purge:
		// Nothing is on the nodes any more: a later update pulls all.
		st.ProcessedSpec = nil
		st.PodImages = nil
		st.ObservedGeneration = op.generation
	case plan.NewNodes:
		// The spec was not acted on as a whole: leave its record be,
		// but for the pod images it took in, which it pulled on every
		// node it covers.
		if op.grown {
			st.PodImages = op.podImages
		}
	default:
		st.ProcessedSpec = op.named.DeepCopy()
		st.PodImages = op.podImages
		st.ObservedGeneration = op.generation
	}
}

// wantedImages are the images of a spec, as written.
func wantedImages(spec *v1alpha2.ImageCacheSpec) map[string]bool {
	out := map[string]bool{}
	for i := range spec.CacheSpec {
		for _, img := range spec.CacheSpec[i].Images {
			out[img] = true
		}
	}
	return out
}

// mergeFailures keeps the earlier failures on the nodes a new-node
// operation did not serve and adds its own.
func mergeFailures(before map[string]v1alpha2.NodeReasonMessageList, served map[string]bool, now map[string]v1alpha2.NodeReasonMessageList) map[string]v1alpha2.NodeReasonMessageList {
	out := map[string]v1alpha2.NodeReasonMessageList{}
	for img, l := range before {
		for _, f := range l {
			if !served[f.Node] {
				out[img] = append(out[img], f)
			}
		}
	}
	for img, l := range now {
		for _, f := range l {
			dup := false
			for _, kept := range out[img] {
				if kept.Node == f.Node {
					dup = true // "(all nodes)" of an invalid image, reported again
					break
				}
			}
			if !dup {
				out[img] = append(out[img], f)
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// wholeCounts counts the cache's pairs on every node: what a refresh would
// find already present, the failures known, the rest done.
func wholeCounts(p *plan.Plan, failures map[string]v1alpha2.NodeReasonMessageList, omitted int32) v1alpha2.Counts {
	failed := omitted
	for _, l := range failures {
		failed += int32(len(l))
	}
	c := v1alpha2.Counts{Desired: int32(p.Desired), AlreadyPresent: int32(p.Present), Skipped: int32(p.Skipped), Failed: failed}
	c.Succeeded = max(c.Desired-c.AlreadyPresent-c.Failed, 0)
	return c
}

// decline ends an operation that cannot run, before any Job, with the
// original's failed status, the reason in failures, a condition and an
// Event, so that the cache neither hangs in Processing nor starts again
// until its spec changes or a refresh is asked for.
func (r *Reconciler) decline(ctx context.Context, cache *v1alpha2.ImageCache, kind plan.Operation, reason, why string) error {
	if err := r.consumeAnnotations(ctx, cache, consumedAnnotations(kind, cache.Annotations)); err != nil {
		return err
	}
	msg := v1alpha2.ImageCacheMessageImagePullFailedForSomeImages
	if kind == plan.Purge {
		msg = v1alpha2.ImageCacheMessageImageDeleteFailedForSomeImages
	}
	err := r.statusWriter().WriteFinal(ctx, client.ObjectKeyFromObject(cache), cache.UID, 1, func(st *v1alpha2.ImageCacheStatus, _ int) {
		now := metav1.NewTime(r.Clock.Now())
		st.Status, st.Reason, st.Message = v1alpha2.ImageCacheActionStatusFailed, string(kind), msg
		st.Failures = map[string]v1alpha2.NodeReasonMessageList{"(spec)": {{Node: "(all nodes)", Reason: reason, Message: why}}}
		st.FailuresOmitted = 0
		st.StartTime, st.CompletionTime, st.RefreshedTime = &now, &now, &now
		st.ObservedGeneration = cache.Generation
		st.Counts, st.Progress = nil, ""
		cachestatus.SetConditions(st, false, reason, why, cache.Generation)
	})
	if err != nil {
		return client.IgnoreNotFound(err)
	}
	log.FromContext(ctx).Info("operation declined", "operation", kind, "reason", reason, "why", why)
	r.Recorder.Event(cache, corev1.EventTypeWarning, reason, why)
	return nil
}

// coverageAfter is the set of nodes the cache's images are on once op
// ended. A create or refresh covers every node eligible at its start or
// added while it ran; an update and a new-nodes operation cover no node that
// the earlier operations had not, besides the nodes they worked on; a purge
// none.
func (r *Reconciler) coverageAfter(key types.NamespacedName, op *operation) map[string]bool {
	switch op.kind {
	case plan.Purge:
		return map[string]bool{}
	case plan.Update, plan.NewNodes:
		prev, known := r.ops.covered(key, op.uid)
		if !known {
			// First sight of the cache since start-up: the nodes that
			// existed when the previous operation started, as newNodes
			// takes them.
			prev = op.priorCoverage
		}
		out := map[string]bool{}
		for n := range op.eligible {
			if prev[n] || op.only[n] || op.joined[n] {
				out[n] = true
			}
		}
		return out
	}
	return op.eligible
}

// keptPairs counts the (image, node) pairs a delete kept.
func keptPairs(kept map[string]v1alpha2.NodeReasonMessageList) int {
	n := 0
	for _, l := range kept {
		n += len(l)
	}
	return n
}
