// Package podwatch keeps what fromPods reads of every pod and namespace: a
// pod's identity, labels, controller and image names; a namespace's labels.
// It is an informer of its own because the manager's pod cache holds only the
// controller's Job pods, and starts only when a cache first asks for pods, so
// that a cluster using no fromPods pays nothing for it. Where the controller
// may not list pods or namespaces, the watch reports why instead of holding
// up the controller: fromPods waits, the named images are cached regardless.
package podwatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// ErrNotSynced is returned while the first list of pods or namespaces has
// not arrived, for at most SyncGrace; the watch's events wake the caller
// when it does.
var ErrNotSynced = errors.New("pods and namespaces not listed yet")

// SyncGrace is how long a first list may take before it counts as failed:
// a cache may wait for its pods to be known before its first operation,
// but not for ever.
const SyncGrace = 30 * time.Second

// Watch holds the pod and namespace informers.
type Watch struct {
	pods, namespaces toolscache.SharedIndexInformer

	mu      sync.Mutex
	ctx     context.Context // the manager's, set by Start
	started time.Time
	lastErr map[string]error // by resource, until its informer has synced
}

// New watches every pod and namespace through cs.
func New(cs kubernetes.Interface) *Watch {
	w := &Watch{lastErr: map[string]error{}}
	w.pods = w.informer(cs, "pods", &corev1.Pod{}, Pod)
	w.namespaces = w.informer(cs, "namespaces", &corev1.Namespace{}, Namespace)
	return w
}

func (w *Watch) informer(cs kubernetes.Interface, resource string, obj runtime.Object, trim toolscache.TransformFunc) toolscache.SharedIndexInformer {
	lw := toolscache.NewListWatchFromClient(cs.CoreV1().RESTClient(), resource, metav1.NamespaceAll, fields.Everything())
	inf := toolscache.NewSharedIndexInformer(lw, obj, 0, toolscache.Indexers{})
	// Both only fail once the informer has started.
	_ = inf.SetTransform(trim)
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *toolscache.Reflector, err error) {
		w.mu.Lock()
		w.lastErr[resource] = err
		w.mu.Unlock()
		toolscache.DefaultWatchErrorHandler(ctx, r, err)
	})
	return inf
}

// Start records the manager's context for the informers, which run once
// Snapshot is first called. Every replica runs them, leader or not, as for
// the other informers.
func (w *Watch) Start(ctx context.Context) error {
	w.mu.Lock()
	w.ctx = ctx
	w.mu.Unlock()
	<-ctx.Done()
	return nil
}

// NeedLeaderElection is false: see Start.
func (w *Watch) NeedLeaderElection() bool { return false }

// Snapshot returns the pods and the namespaces' labels as last seen. Until
// both have been listed it returns ErrNotSynced, or why the list failed
// (the controller may not list them, say); the first call starts them.
// Nothing may write to the pods returned.
func (w *Watch) Snapshot() ([]*corev1.Pod, map[string]labels.Set, error) {
	w.mu.Lock()
	if w.started.IsZero() && w.ctx != nil {
		w.started = time.Now()
		go w.pods.Run(w.ctx.Done())
		go w.namespaces.Run(w.ctx.Done())
	}
	if !w.pods.HasSynced() || !w.namespaces.HasSynced() {
		var errs []error
		for _, res := range []string{"namespaces", "pods"} {
			if err := w.lastErr[res]; err != nil {
				errs = append(errs, fmt.Errorf("listing %s: %w", res, err))
			}
		}
		waited := time.Since(w.started)
		w.mu.Unlock()
		if len(errs) > 0 {
			return nil, nil, errors.Join(errs...)
		}
		if w.started.IsZero() || waited < SyncGrace {
			return nil, nil, ErrNotSynced
		}
		return nil, nil, fmt.Errorf("pods and namespaces not listed %s after the watch started", waited.Truncate(time.Second))
	}
	w.mu.Unlock()
	var pods []*corev1.Pod
	for _, o := range w.pods.GetStore().List() {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	ns := map[string]labels.Set{}
	for _, o := range w.namespaces.GetStore().List() {
		if n, ok := o.(*corev1.Namespace); ok {
			ns[n.Name] = n.Labels
		}
	}
	return pods, ns, nil
}

// Sources feed pod and namespace events to a controller through h, passed
// preds. Unlike the Job watch they are no SyncingSource: the controller must
// not wait for pods it may never be allowed to list.
func (w *Watch) Sources(h handler.EventHandler, preds ...predicate.Predicate) []source.Source {
	return []source.Source{
		&source.Informer{Informer: w.pods, Handler: h, Predicates: preds},
		&source.Informer{Informer: w.namespaces, Handler: h, Predicates: preds},
	}
}

// Pod keeps what fromPods reads of a pod: its identity, labels, controller
// and the images of its containers. A pod's spec and status are most of its
// size, and every pod of the cluster is held.
func Pod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion, Labels: p.Labels,
	}}
	if ref := metav1.GetControllerOf(p); ref != nil {
		out.OwnerReferences = []metav1.OwnerReference{{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: ref.UID, Controller: ref.Controller}}
	}
	for _, c := range p.Spec.InitContainers {
		out.Spec.InitContainers = append(out.Spec.InitContainers, corev1.Container{Name: c.Name, Image: c.Image})
	}
	for _, c := range p.Spec.Containers {
		out.Spec.Containers = append(out.Spec.Containers, corev1.Container{Name: c.Name, Image: c.Image})
	}
	for _, c := range p.Spec.EphemeralContainers {
		out.Spec.EphemeralContainers = append(out.Spec.EphemeralContainers,
			corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: c.Name, Image: c.Image}})
	}
	return out, nil
}

// Namespace keeps a namespace's name and labels.
func Namespace(obj any) (any, error) {
	n, ok := obj.(*corev1.Namespace)
	if !ok {
		return obj, nil
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion, Labels: n.Labels,
	}}, nil
}

var (
	_ manager.Runnable               = &Watch{}
	_ manager.LeaderElectionRunnable = &Watch{}
	_ toolscache.TransformFunc       = Pod
	_ toolscache.TransformFunc       = Namespace
)
