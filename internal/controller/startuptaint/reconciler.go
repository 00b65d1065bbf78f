// Package startuptaint releases nodes held by the startup taint
// (--node-startup-taint). A node pool registers its new nodes with the
// taint, so that no pod lands on them before their images are cached; this
// controller removes exactly that taint once every (image, node) pair of
// every cache that applies to the node is settled, at once from a node no
// cache applies to, and anyway at the timeout. The rules are the pure
// package hold; how each cache stands on the node is read from the ledger
// the ImageCache reconciler writes (package heldledger), which also wakes a
// node when a cache's pairs on it settle. Nothing flows back: this
// controller only reads.
//
// It is level-based: a node is held because it carries the taint, and
// nothing else is kept, so a restart finds every held node again from the
// taint itself, and the ImageCache reconciler treats such a node as new to
// every cache, whose operations settle it again.
package startuptaint

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/heldledger"
	"github.com/kubefledged/kube-fledged/internal/hold"
	"github.com/kubefledged/kube-fledged/internal/metrics"
	"github.com/kubefledged/kube-fledged/internal/plan"
)

// DefaultResync is how often a held node is looked at again when nothing
// wakes it. Every change that can release it wakes it (the node, a cache,
// a cache's pairs on it settling, its timeout), so this is a safety net
// only, and cheap: held nodes are few.
const DefaultResync = 30 * time.Second

// Reconciler removes the startup taint from nodes that are ready to serve.
type Reconciler struct {
	Client   client.Client
	Recorder record.EventRecorder
	Clock    clock.Clock
	Taint    *plan.StartupTaint
	// Timeout is --node-startup-taint-timeout, counted from the node's
	// creation.
	Timeout time.Duration
	// Ledger is how each cache stands on each held node.
	Ledger *heldledger.Ledger
	Resync time.Duration
}

// New returns a reconciler that reads ledger.
func New(c client.Client, rec record.EventRecorder, taint *plan.StartupTaint, timeout time.Duration, ledger *heldledger.Ledger) *Reconciler {
	return &Reconciler{Client: c, Recorder: rec, Clock: clock.RealClock{}, Taint: taint, Timeout: timeout, Ledger: ledger,
		Resync: DefaultResync}
}

// SetupWithManager registers the controller: held nodes as they change,
// every held node when a cache changes (its spec may now select a node or
// not, its status says an operation started or ended), and the ledger's
// wake-ups.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("startuptaint").
		For(&corev1.Node{}, builder.WithPredicates(r.heldChanges())).
		Watches(&v1alpha2.ImageCache{}, handler.EnqueueRequestsFromMapFunc(r.heldNodes)).
		WatchesRawSource(source.Channel(r.Ledger.Settled(), &handler.TypedEnqueueRequestForObject[*corev1.Node]{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(r)
}

// heldChanges lets through the events of nodes that carry the taint and
// that can change the decision: a join, and changes of labels (selectors),
// taints, cordon or readiness. Heartbeats are ignored.
func (r *Reconciler) heldChanges() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return r.held(e.Object) },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*corev1.Node)
			n, ok2 := e.ObjectNew.(*corev1.Node)
			if !ok1 || !ok2 || !r.Taint.On(n) {
				return false
			}
			return plan.Ready(o) != plan.Ready(n) || o.Spec.Unschedulable != n.Spec.Unschedulable ||
				!reflect.DeepEqual(o.Labels, n.Labels) || !reflect.DeepEqual(o.Spec.Taints, n.Spec.Taints)
		},
	}
}

func (r *Reconciler) held(obj client.Object) bool {
	n, ok := obj.(*corev1.Node)
	return ok && r.Taint.On(n)
}

// heldNodes maps a cache event to every held node: which of them the cache
// selected before its edit cannot be told, and they are few.
func (r *Reconciler) heldNodes(ctx context.Context, _ client.Object) []reconcile.Request {
	nodes := &corev1.NodeList{}
	if err := r.Client.List(ctx, nodes, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range nodes.Items {
		if r.Taint.On(&nodes.Items[i]) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: nodes.Items[i].Name}})
		}
	}
	return out
}

// Reconcile decides on one node and, when it is to be released, removes
// the taint, records an Event on the node and the metrics.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	node := &corev1.Node{}
	if err := r.Client.Get(ctx, req.NamespacedName, node); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !r.Taint.On(node) || !node.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	caches := &v1alpha2.ImageCacheList{}
	if err := r.Client.List(ctx, caches, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, err
	}
	d := hold.Decide(r.input(node, caches.Items))
	logger := log.FromContext(ctx)
	if !d.Release() {
		logger.V(1).Info("node held", "waitingFor", d.Waiting, "timeoutIn", d.After.String())
		return ctrl.Result{RequeueAfter: min(d.After, r.resync())}, nil
	}
	removed, err := r.removeTaint(ctx, node.Name)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("removing taint %s: %w", r.Taint, err)
	}
	if !removed {
		// Someone else removed it meanwhile: theirs is the release.
		return ctrl.Result{}, nil
	}
	held := r.Clock.Since(node.CreationTimestamp.Time)
	metrics.NodeHoldSeconds.WithLabelValues(string(d.Reason)).Observe(held.Seconds())
	if d.Reason == hold.Timeout {
		metrics.NodeTimeoutImages.Add(float64(len(d.NotReady)))
	}
	typ, reason, msg := d.Event(r.Taint)
	r.Recorder.Event(node, typ, reason, msg)
	logger.Info("node released", "reason", d.Reason, "held", held.String(), "caches", d.Caches, "failed", len(d.Failed), "notReady", len(d.NotReady))
	return ctrl.Result{}, nil
}

// input is what a decision on node reads: every cache, and how each stands
// on the node.
func (r *Reconciler) input(node *corev1.Node, caches []v1alpha2.ImageCache) hold.Input {
	in := hold.Input{Node: node, Taint: r.Taint, Timeout: r.Timeout, Now: r.Clock.Now()}
	for i := range caches {
		c := &caches[i]
		in.Caches = append(in.Caches, hold.Cache{Cache: c, State: r.Ledger.State(client.ObjectKeyFromObject(c), c.UID, node.Name)})
	}
	return in
}

// Held lists the nodes the taint holds now, for the metrics, with the
// images each waits for as far as the ImageCache reconciler knows (see
// hold.Waiting): on a replica that is not the leader, it knows of none.
func (r *Reconciler) Held(ctx context.Context) ([]metrics.HeldNode, error) {
	nodes := &corev1.NodeList{}
	if err := r.Client.List(ctx, nodes, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var caches *v1alpha2.ImageCacheList
	var out []metrics.HeldNode
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if !r.Taint.On(n) {
			continue
		}
		if caches == nil {
			caches = &v1alpha2.ImageCacheList{}
			if err := r.Client.List(ctx, caches, client.UnsafeDisableDeepCopy); err != nil {
				return nil, err
			}
		}
		out = append(out, metrics.HeldNode{Name: n.Name, Created: n.CreationTimestamp.Time, Waiting: hold.Waiting(r.input(n, caches.Items))})
	}
	return out, nil
}

func (r *Reconciler) resync() time.Duration {
	if r.Resync <= 0 {
		return DefaultResync
	}
	return r.Resync
}

// jsonPatchOp is one operation of a JSON patch (RFC 6902).
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// removeTaint removes the startup taint, and only it, from the node's
// taints. A JSON patch first tests that the list is the one read, then
// writes it without the taint: the kubelet, the node lifecycle controller,
// a node pool's own controller or an admin may change the node's taints at
// any time, and a patch of the whole list built from a stale read would
// undo their change. (Taints have no merge key, so a strategic merge patch
// would replace the list too.) A failed test (422) or a conflict is
// retried on a fresh read. It says whether this call removed the taint.
func (r *Reconciler) removeTaint(ctx context.Context, name string) (bool, error) {
	removed := false
	retriable := func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsInvalid(err) }
	err := retry.OnError(retry.DefaultBackoff, retriable, func() error {
		node := &corev1.Node{}
		if err := r.Client.Get(ctx, types.NamespacedName{Name: name}, node); err != nil {
			return err
		}
		keep := make([]corev1.Taint, 0, len(node.Spec.Taints))
		for i := range node.Spec.Taints {
			if !r.Taint.Matches(&node.Spec.Taints[i]) {
				keep = append(keep, node.Spec.Taints[i])
			}
		}
		if len(keep) == len(node.Spec.Taints) {
			return nil
		}
		ops := []jsonPatchOp{{Op: "test", Path: "/spec/taints", Value: node.Spec.Taints}}
		if len(keep) == 0 {
			ops = append(ops, jsonPatchOp{Op: "remove", Path: "/spec/taints"})
		} else {
			ops = append(ops, jsonPatchOp{Op: "replace", Path: "/spec/taints", Value: keep})
		}
		body, err := json.Marshal(ops)
		if err != nil {
			return err
		}
		target := &corev1.Node{}
		target.Name = name
		if err := r.Client.Patch(ctx, target, client.RawPatch(types.JSONPatchType, body)); err != nil {
			return err
		}
		removed = true
		return nil
	})
	return removed, client.IgnoreNotFound(err)
}
