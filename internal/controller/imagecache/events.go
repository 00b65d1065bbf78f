package imagecache

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
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
