package imagecache

import (
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// passes names the creates and deletes a watch lets through.
type passes struct{ creates, deletes bool }

// changes lets through the creates and deletes that p names, and the updates
// of a T that changed says matter. The watches here are informers, which
// send no generic events, so none pass; nor does an update of another type.
func changes[T client.Object](p passes, changed func(old, new T) bool) predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return p.creates },
		DeleteFunc:  func(event.DeleteEvent) bool { return p.deletes },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(T)
			n, ok2 := e.ObjectNew.(T)
			return ok1 && ok2 && changed(o, n)
		},
	}
}
