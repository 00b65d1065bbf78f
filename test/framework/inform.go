package framework

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Lister and Watcher are a typed client's List and Watch of one kind, as
// kube.CoreV1().Pods(ns) has them.
type (
	Lister[L runtime.Object] func(context.Context, metav1.ListOptions) (L, error)
	Watcher                  func(context.Context, metav1.ListOptions) (watch.Interface, error)
)

// InformTest runs Inform, for the rest of the test, on what list and watch
// return with the label selector sel ("" for all), and fails the test when
// the first list does not come within ClusterTimeout.
func InformTest[T, L runtime.Object](t testing.TB, kube kubernetes.Interface, list Lister[L], watchFn Watcher, sel string,
	example T, handle func(typ watch.EventType, obj T, initial bool)) {
	t.Helper()
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = sel
			return list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = sel
			return watchFn(ctx, o)
		},
	}, kube)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	// An API server that does not answer fails the test rather than hanging it.
	late := time.AfterFunc(ClusterTimeout, cancel)
	err := Inform(ctx, lw, example, nil, handle)
	late.Stop()
	if err != nil {
		t.Fatal(err)
	}
}

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
