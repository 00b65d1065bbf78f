package framework

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// Inform runs an informer on what lw lists until ctx ends, and returns once it has listed
// it (or ctx ended first). An informer rather than a bare watch, because a watch ends
// for good when the API server or etcd restarts, while an informer lists again and
// reports what changed in between.
//
// handle sees each change as a watch would report it, of the type of example:
// watch.Added, with initial true for what the first list found; watch.Modified only for
// a change (a second list replays every object, changed or not); watch.Deleted with the
// last state known, also for what vanished while no watch was open. It runs on the
// informer's goroutine, one change at a time.
func Inform[T runtime.Object](ctx context.Context, lw cache.ListerWatcher, example T, transform cache.TransformFunc,
	handle func(typ watch.EventType, obj T, initial bool)) error {
	inf := cache.NewSharedIndexInformer(lw, example, 0, cache.Indexers{})
	if transform != nil {
		if err := inf.SetTransform(transform); err != nil {
			return err
		}
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if o, ok := obj.(T); ok {
				handle(watch.Added, o, initial)
			}
		},
		UpdateFunc: func(old, obj any) {
			if o, ok := obj.(T); ok && !sameVersion(old, obj) {
				handle(watch.Modified, o, false)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if o, ok := obj.(T); ok {
				handle(watch.Deleted, o, false)
			}
		},
	})
	if err != nil {
		return err
	}
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("informer for %T did not sync: %w", example, ctx.Err())
	}
	return nil
}

// sameVersion tells a replay from a change. Objects without a resource version (a fake
// clientset's) are always a change.
func sameVersion(old, obj any) bool {
	a, errA := meta.Accessor(old)
	b, errB := meta.Accessor(obj)
	return errA == nil && errB == nil && a.GetResourceVersion() != "" && a.GetResourceVersion() == b.GetResourceVersion()
}
