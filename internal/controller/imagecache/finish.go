package imagecache

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/metrics"
	"github.com/kubefledged/kube-fledged/internal/plan"
	"github.com/kubefledged/kube-fledged/internal/results"
)

// finish ends an operation: Jobs are deleted or labelled by the retention
// policy, the on-demand annotations are removed, the final status is written
// and an Event says how it went. Each step is idempotent; any error retries
// the whole of finish with the results fixed in op.final.
func (r *Reconciler) finish(ctx context.Context, cache *v1alpha2.ImageCache, op *operation) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	if err := r.retain(ctx, cache, op); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.removeAnnotations(ctx, cache); err != nil {
		return ctrl.Result{}, err
	}

	sum := op.final.summary
	if sum.Status == v1alpha2.ImageCacheActionStatusNoImagesPulledOrDeleted && len(op.unmatched) > 0 {
		sum.Message += ": " + strings.Join(op.unmatched, "; ")
	}
	key := types.NamespacedName{Namespace: cache.Namespace, Name: cache.Name}
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		fresh := &v1alpha2.ImageCache{}
		if err := r.APIReader.Get(ctx, key, fresh); err != nil {
			return err
		}
		if fresh.UID != op.uid {
			return apierrors.NewNotFound(v1alpha2.GroupVersion.WithResource("imagecaches").GroupResource(), key.Name)
		}
		st := &fresh.Status
		st.Status = sum.Status
		st.Reason = string(op.kind)
		st.Message = sum.Message
		st.Failures, st.FailuresOmitted = boundFailures(sum.Failures)
		now := metav1.NewTime(r.Clock.Now())
		st.CompletionTime = &now
		st.Counts = op.counts.DeepCopy()
		st.Progress = progress(op.counts)
		switch op.kind {
		case plan.Purge:
			// Nothing is on the nodes any more: a later update pulls all.
			st.ProcessedSpec = nil
			st.ObservedGeneration = op.generation
		case plan.NewNodes:
			// The spec was not acted on as a whole: leave its record be.
		default:
			st.ProcessedSpec = op.spec.DeepCopy()
			st.ObservedGeneration = op.generation
		}
		setConditions(fresh, false, string(op.kind), sum.Message)
		if err := r.Client.Status().Update(ctx, fresh); err != nil {
			return err
		}
		cache = fresh
		return nil
	})
	if apierrors.IsNotFound(err) {
		r.forget(key)
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("writing the final status: %w", err)
	}
	r.releaseAll(key, op)
	r.limiter.Forget(key)
	r.ops.drop(key)
	r.ops.setCoverage(key, op.uid, r.coverageAfter(key, op))

	evType := corev1.EventTypeNormal
	if sum.Status == v1alpha2.ImageCacheActionStatusFailed {
		evType = corev1.EventTypeWarning
	}
	r.Recorder.Event(cache, evType, string(op.kind), sum.Message)
	metrics.OperationDuration.WithLabelValues(string(op.kind), string(sum.Status)).Observe(r.Clock.Since(op.start).Seconds())
	logger.Info("operation finished", "id", op.id, "operation", op.kind, "status", sum.Status,
		"jobs", len(op.work), "failedImages", len(sum.Failures), "took", r.Clock.Since(op.start).String())
	// The status write wakes the cache again; that reconcile schedules the
	// next due operation (a spec edit made meanwhile, a periodic refresh).
	return ctrl.Result{}, nil
}

// retain applies --job-retention-policy to the operation's Jobs. delete:
// all go, with their pods, whatever their result; each went when it was
// settled, so only what that may have missed is swept now. retain: all
// stay, running ones included, labelled with their result for
// `kubectl get jobs -l`.
func (r *Reconciler) retain(ctx context.Context, cache *v1alpha2.ImageCache, op *operation) error {
	if !r.Config.Retain {
		if !op.sweep {
			return nil
		}
		return client.IgnoreNotFound(r.Client.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(cache.Namespace),
			client.MatchingLabels{jobs.LabelOperation: op.id},
			client.PropagationPolicy(metav1.DeletePropagationBackground)))
	}
	var names []string
	for _, name := range op.names {
		_, settled := op.settled[name]
		if _, created := op.createdAt[name]; created && settled {
			names = append(names, name)
		}
	}
	_, first := inParallel(len(names), r.Config.CreateParallelism, func(i int) error {
		return r.labelResult(ctx, cache.Namespace, names[i], op.settled[names[i]])
	})
	return first
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

func (r *Reconciler) labelResult(ctx context.Context, ns, name string, o results.Outcome) error {
	result := resultOf(o)
	msg := o.Reason
	if o.Message != "" {
		msg += ": " + o.Message
	}
	patch := map[string]any{"metadata": map[string]any{
		"labels":      map[string]string{jobs.LabelResult: result},
		"annotations": map[string]string{jobs.AnnotationResultMsg: msg},
	}}
	body, _ := json.Marshal(patch)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	return client.IgnoreNotFound(r.Client.Patch(ctx, job, client.RawPatch(types.MergePatchType, body)))
}

// removeAnnotations drops the on-demand annotations. A merge patch that nulls
// the keys needs no resourceVersion and is a no-op when they are gone.
func (r *Reconciler) removeAnnotations(ctx context.Context, cache *v1alpha2.ImageCache) error {
	_, refresh := cache.Annotations[v1alpha2.RefreshAnnotation]
	_, purge := cache.Annotations[v1alpha2.PurgeAnnotation]
	if !refresh && !purge {
		return nil
	}
	body := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:null,%q:null}}}`, v1alpha2.RefreshAnnotation, v1alpha2.PurgeAnnotation))
	target := &v1alpha2.ImageCache{ObjectMeta: metav1.ObjectMeta{Namespace: cache.Namespace, Name: cache.Name}}
	return client.IgnoreNotFound(r.Client.Patch(ctx, target, client.RawPatch(types.MergePatchType, body)))
}
