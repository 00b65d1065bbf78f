package imagecache

import (
	"context"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/plan"
)

// nodeChanges lets through the node events that can make a node newly
// eligible for a cache: it joins, becomes Ready, is uncordoned, or its labels
// or taints change. Heartbeats and image list updates are ignored.
func nodeChanges() predicate.Predicate {
	return changes(passes{creates: true}, func(o, n *corev1.Node) bool {
		return plan.Ready(o) != plan.Ready(n) ||
			o.Spec.Unschedulable != n.Spec.Unschedulable ||
			!reflect.DeepEqual(o.Labels, n.Labels) ||
			!reflect.DeepEqual(o.Spec.Taints, n.Spec.Taints)
	})
}

// cachesForNode maps a node to the caches with a list that selects it, and
// tells the running operations of those caches that a node changed.
func (r *Reconciler) cachesForNode(ctx context.Context, obj client.Object) []reconcile.Request {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return nil
	}
	if r.Config.StartupTaint != nil && !r.Config.StartupTaint.On(node) {
		// Released (or never held): nobody asks about it any more.
		r.Held.Released(node.Name)
	}
	out := r.cachesWhere(ctx, func(_ *v1alpha2.ImageCache, l *v1alpha2.CacheSpecImages) bool { return plan.Selects(l, node) })
	for _, req := range out {
		r.ops.nodeChanged(req.NamespacedName)
	}
	return out
}

// cachesWhere returns the caches with a list that pick says yes to.
func (r *Reconciler) cachesWhere(ctx context.Context, pick func(c *v1alpha2.ImageCache, l *v1alpha2.CacheSpecImages) bool) []reconcile.Request {
	caches := &v1alpha2.ImageCacheList{}
	if err := r.Client.List(ctx, caches); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range caches.Items {
		c := &caches.Items[i]
		for j := range c.Spec.CacheSpec {
			if pick(c, &c.Spec.CacheSpec[j]) {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(c)})
				break
			}
		}
	}
	return out
}

// newNodes returns the nodes the cache's lists could use now but that its
// latest operation did not cover. A purged cache covers nothing and wants
// nothing. The first time the controller sees a cache it has no memory of
// that operation: the eligible nodes that existed when it started count as
// covered, and those created since are new.
func (r *Reconciler) newNodes(ctx context.Context, cache *v1alpha2.ImageCache) (map[string]bool, error) {
	if cache.Status.Status == "" || cache.Status.Reason == string(plan.Purge) {
		return nil, nil
	}
	nodes, err := r.listNodes(ctx)
	if err != nil {
		return nil, err
	}
	key := client.ObjectKeyFromObject(cache)
	r.pruneHeld(key, nodes.Items)
	eligible := plan.EligibleNodes(&cache.Spec, nodes.Items, r.Config.StartupTaint)
	covered, ok := r.ops.covered(key, cache.UID)
	if !ok {
		covered = plan.ExistedAt(nodes.Items, eligible, cache.Status.StartTime, r.Config.StartupTaint)
	}
	fresh := map[string]bool{}
	still := map[string]bool{}
	for n := range eligible {
		if covered[n] {
			still[n] = true
		} else {
			fresh[n] = true
		}
	}
	// A node that left (NotReady, cordoned, relabelled) is forgotten, so
	// that it is caught up when it comes back.
	r.ops.setCoverage(key, cache.UID, still)
	return fresh, nil
}

// listNodes reads every node from the informer cache without copying them:
// planning only reads nodes, and copying 1000 of them at each start was most
// of the garbage an operation made before its first Job.
func (r *Reconciler) listNodes(ctx context.Context) (*corev1.NodeList, error) {
	nodes := &corev1.NodeList{}
	if err := r.Client.List(ctx, nodes, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	return nodes, nil
}
