package imagecache

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
)

// jobEvents does what Owns(&batchv1.Job{}) does, waking the cache that
// controls the Job, and first notes which Job changed, so that settling
// reads that Job and not every Job of the operation. The note is taken
// before the wake-up, and the informer cache is updated before any handler
// runs, so the reconcile that follows sees the change.
func (r *Reconciler) jobEvents(mgr ctrl.Manager) handler.EventHandler {
	owner := handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &v1alpha2.ImageCache{}, handler.OnlyControllerOwner())
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q queue) {
			r.jobChanged(e.Object)
			owner.Create(ctx, e, q)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q queue) {
			r.jobChanged(e.ObjectNew)
			owner.Update(ctx, e, q)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q queue) {
			r.jobChanged(e.Object)
			owner.Delete(ctx, e, q)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q queue) {
			r.jobChanged(e.Object)
			owner.Generic(ctx, e, q)
		},
	}
}

func (r *Reconciler) jobChanged(obj client.Object) {
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.Kind != "ImageCache" || ref.APIVersion != v1alpha2.GroupVersion.String() {
		return
	}
	r.ops.jobChanged(types.NamespacedName{Namespace: obj.GetNamespace(), Name: ref.Name}, obj.GetName())
}

// jobPodChanges lets through the Job pod updates that change a container's state,
// and only when pulls run in node Jobs: a Job per (image, node) says all in
// its own status.
func jobPodChanges(perNode bool) predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*corev1.Pod)
			n, ok2 := e.ObjectNew.(*corev1.Pod)
			return perNode && ok1 && ok2 && (o.Status.Phase != n.Status.Phase ||
				!equality.Semantic.DeepEqual(o.Status.ContainerStatuses, n.Status.ContainerStatuses) ||
				!equality.Semantic.DeepEqual(o.Status.InitContainerStatuses, n.Status.InitContainerStatuses))
		},
	}
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
