package imagecache

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/jobwatch"
	"github.com/kubefledged/kube-fledged/internal/results"
)

// cacheForJob does what Owns(&batchv1.Job{}) does, mapping a Job to the
// cache that controls it, or, for a delete Job in the controller's
// namespace (which no owner reference can cross), the cache its annotation
// names (jobs.CacheOf); it first notes which Job changed, so that
// settling reads that Job and not every Job of the operation. The note is
// taken before the wake-up, and the informer cache is updated before any
// handler runs, so the reconcile that follows sees the change.
func (r *Reconciler) cacheForJob(_ context.Context, obj client.Object) []reconcile.Request {
	ns, name, ok := jobs.CacheOf(obj.GetNamespace(), obj.GetOwnerReferences(), obj.GetAnnotations())
	if !ok {
		return nil
	}
	key := types.NamespacedName{Namespace: ns, Name: name}
	if started(obj) {
		// Timed here, as the event arrives: a reconcile may come later.
		r.limiter.Started(windowKey(key, obj.GetName()), r.Clock.Now())
	}
	r.ops.jobChanged(key, obj.GetName())
	return []reconcile.Request{{NamespacedName: key}}
}

// started says whether the Job controller has started a Job: the record
// jobwatch keeps, or a whole Job (the unit tests').
func started(obj client.Object) bool {
	switch j := obj.(type) {
	case *jobwatch.Job:
		return j.StartTime != nil
	case *batchv1.Job:
		return j.Status.StartTime != nil
	}
	return false
}

// jobPodChanges lets through the Job pod updates that change a container's
// state. A Job per (image, node) says all else in its own status, but its
// pod stays Pending on a pull error: of its pods only the updates that
// show one pass, so that an image that cannot be pulled for good fails at
// once in either granularity.
func jobPodChanges(perNode bool) predicate.Predicate {
	return changes(passes{}, func(o, n *corev1.Pod) bool {
		changed := o.Status.Phase != n.Status.Phase ||
			!equality.Semantic.DeepEqual(o.Status.ContainerStatuses, n.Status.ContainerStatuses) ||
			!equality.Semantic.DeepEqual(o.Status.InitContainerStatuses, n.Status.InitContainerStatuses)
		return changed && (perNode || results.PullFailing(n))
	})
}

// cacheForPod maps a pod of a running operation's Job to its cache, and
// notes that the Job changed.
func (r *Reconciler) cacheForPod(_ context.Context, obj client.Object) []reconcile.Request {
	lbls := obj.GetLabels()
	job := lbls[batchv1.JobNameLabel]
	if job == "" {
		job = lbls["job-name"]
	}
	op := lbls[jobs.LabelOperation]
	if job == "" || op == "" {
		return nil
	}
	key, ok := r.ops.podChanged(op, job)
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: key}}
}
