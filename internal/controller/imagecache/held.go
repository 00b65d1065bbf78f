package imagecache

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/hold"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/plan"
	"github.com/kubefledged/kube-fledged/internal/results"
)

// The startup-taint controller asks, for each node that carries the taint
// and each cache that applies to it, whether every (image, node) pair of
// the cache on the node is settled. Neither the cache's status (its counts
// are not per node, its failures bounded) nor the Jobs (deleted as they
// settle) can tell, so the reconciler keeps a small record per held node
// and cache: the images still pending and those that failed. Only held
// nodes get one, so a cluster without the taint pays nothing.
//
// The record lives in memory only, and needs not outlive the process: a
// node that still carries the taint after a restart counts as new to every
// cache (plan.ExistedAt), so a new-node operation settles its pairs again
// (those the node already reports need no Job) and makes a new record.

// heldNode is one cache's record of one held node: its pull images not
// settled yet, and those that failed.
type heldNode struct {
	pending map[string]bool
	failed  map[string]bool
}

func (h *heldNode) done() bool { return len(h.pending) == 0 }

// heldCache are a cache's records, by node. The UID keeps a cache deleted
// and recreated under its name from reading the old one's.
type heldCache struct {
	uid   types.UID
	nodes map[string]*heldNode
}

// settledPair is one pull of a held node that settled.
type settledPair struct {
	node, image string
	failed      bool
}

// holdNodes records the pairs an operation is about to settle on the held
// nodes it serves: served are the nodes it pulls onto (all eligible ones, or
// the new or joined ones), merge adds to the records there are (an update
// pulls only what the nodes do not report) instead of replacing them, invalid are
// the spec's images that fail everywhere without a Job. A record with
// nothing pending is done at once (every image already present) and the
// node's watcher is told.
func (r *Reconciler) holdNodes(key types.NamespacedName, op *operation, nodes []corev1.Node, served map[string]bool, work []jobs.Work, invalid map[string]string, merge bool) {
	if r.Config.StartupTaint == nil {
		return
	}
	fresh := map[string]*heldNode{}
	for i := range nodes {
		n := &nodes[i]
		if served[n.Name] && r.Config.StartupTaint.On(n) {
			h := &heldNode{pending: map[string]bool{}, failed: map[string]bool{}}
			for img := range invalid {
				h.failed[img] = true
			}
			fresh[n.Name] = h
		}
	}
	if len(fresh) == 0 {
		return
	}
	for _, w := range work {
		if h := fresh[w.Node.Name]; h != nil && w.Kind == jobs.Pull {
			h.pending[w.Image] = true
		}
	}
	if op.held == nil {
		op.held = map[string]bool{}
	}
	for n := range fresh {
		op.held[n] = true
	}
	r.notifyHeld(r.ops.hold(key, op.uid, fresh, merge))
}

// settleHeld updates the records of the held nodes among the settled Jobs.
func (r *Reconciler) settleHeld(key types.NamespacedName, op *operation, names []string) {
	if len(op.held) == 0 {
		return
	}
	var pairs []settledPair
	for _, name := range names {
		w := op.work[op.index[name]]
		if w.Kind != jobs.Pull || !op.held[w.Node.Name] {
			continue
		}
		pairs = append(pairs, settledPair{node: w.Node.Name, image: w.Image, failed: op.settled[name].State != results.Succeeded})
	}
	if len(pairs) > 0 {
		r.notifyHeld(r.ops.settleHeld(key, op.uid, pairs))
	}
}

func (r *Reconciler) notifyHeld(done []string) {
	if r.HeldNodeSettled == nil {
		return
	}
	for _, n := range done {
		r.HeldNodeSettled(n)
	}
}

// pruneHeld drops the records of nodes that are gone or released: node
// deletions are not watched, and a released node is never asked about.
func (r *Reconciler) pruneHeld(key types.NamespacedName, nodes []corev1.Node) {
	if r.Config.StartupTaint == nil {
		return
	}
	still := map[string]bool{}
	for i := range nodes {
		if r.Config.StartupTaint.On(&nodes[i]) {
			still[nodes[i].Name] = true
		}
	}
	r.ops.pruneHeld(key, still)
}

// NodeState says how a cache stands on a node that carries the startup
// taint, for the startup-taint controller. It may be called from any
// goroutine.
//
//   - With a record: done once nothing is pending, with the failed images.
//   - Without one, while an operation runs: a purge wants nothing; otherwise
//     the node is done only if an earlier operation covered it (it got the
//     taint after), else it waits to join the operation or to get one of
//     its own when this one ends.
//   - Without one or an operation: done if covered, else waiting for the
//     new-node operation the next reconcile starts.
//   - Not known while the reconciler has not looked at the cache since it
//     started.
func (r *Reconciler) NodeState(key types.NamespacedName, uid types.UID, node string) hold.CacheState {
	t := r.ops
	t.mu.Lock()
	defer t.mu.Unlock()
	if hc := t.held[key]; hc != nil && hc.uid == uid {
		if h := hc.nodes[node]; h != nil {
			st := hold.CacheState{Known: true, Done: h.done(), Failed: slices.Sorted(maps.Keys(h.failed))}
			if !st.Done {
				st.Pending = slices.Sorted(maps.Keys(h.pending))
			}
			return st
		}
	}
	c, known := t.coverage[key]
	covered := known && c.uid == uid && c.nodes[node]
	if op := t.ops[key]; op != nil && op.uid == uid {
		return hold.CacheState{Known: true, Done: covered || op.kind == plan.Purge}
	}
	if !known || c.uid != uid {
		return hold.CacheState{}
	}
	return hold.CacheState{Known: true, Done: covered}
}

// hold sets the records of fresh nodes of a cache, replacing those there
// are or, with merge, adding to them. It returns the nodes whose record is
// done.
func (t *tracker) hold(k types.NamespacedName, uid types.UID, fresh map[string]*heldNode, merge bool) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	hc := t.held[k]
	if hc == nil || hc.uid != uid {
		hc = &heldCache{uid: uid, nodes: map[string]*heldNode{}}
		t.held[k] = hc
	}
	var done []string
	for n, h := range fresh {
		if old := hc.nodes[n]; merge && old != nil {
			for img := range old.pending {
				h.pending[img] = true
			}
			for img := range old.failed {
				// An update pulls again what failed: its new
				// result, not the old one, decides.
				if !h.pending[img] {
					h.failed[img] = true
				}
			}
		}
		hc.nodes[n] = h
		if h.done() {
			done = append(done, n)
		}
	}
	return done
}

// settleHeld records settled pairs and returns the nodes whose record
// became done.
func (t *tracker) settleHeld(k types.NamespacedName, uid types.UID, pairs []settledPair) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	hc := t.held[k]
	if hc == nil || hc.uid != uid {
		return nil
	}
	var done []string
	for _, p := range pairs {
		h := hc.nodes[p.node]
		if h == nil || !h.pending[p.image] {
			continue
		}
		delete(h.pending, p.image)
		if p.failed {
			h.failed[p.image] = true
		} else {
			delete(h.failed, p.image)
		}
		if h.done() {
			done = append(done, p.node)
		}
	}
	return done
}

// pruneHeld keeps a cache's records of the nodes in still only.
func (t *tracker) pruneHeld(k types.NamespacedName, still map[string]bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	hc := t.held[k]
	if hc == nil {
		return
	}
	for n := range hc.nodes {
		if !still[n] {
			delete(hc.nodes, n)
		}
	}
	if len(hc.nodes) == 0 {
		delete(t.held, k)
	}
}

// dropHeld drops a cache's records, of a purge.
func (t *tracker) dropHeld(k types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.held, k)
}

// releasedNode drops every cache's record of a node that no longer carries
// the taint.
func (t *tracker) releasedNode(node string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, hc := range t.held {
		delete(hc.nodes, node)
		if len(hc.nodes) == 0 {
			delete(t.held, k)
		}
	}
}

// heldServed are the nodes an operation of kind starting now pulls onto,
// as far as the records go: a create or refresh serves every eligible node,
// a new-node operation its new ones, an update only the nodes earlier
// operations covered (a held node it does not cover gets a new-node
// operation of its own when the update ends, and waits for it).
func (r *Reconciler) heldServed(key types.NamespacedName, op *operation) map[string]bool {
	switch op.kind {
	case plan.NewNodes:
		return op.only
	case plan.Update:
		prev, known := r.ops.covered(key, op.uid)
		if !known {
			prev = op.priorCoverage
		}
		out := map[string]bool{}
		for n := range op.eligible {
			if prev[n] {
				out[n] = true
			}
		}
		return out
	}
	return op.eligible
}

// startHeld makes the records of an operation that just started.
func (r *Reconciler) startHeld(cache *v1alpha2.ImageCache, op *operation, nodes []corev1.Node, p *plan.Plan) {
	if r.Config.StartupTaint == nil {
		return
	}
	key := client.ObjectKeyFromObject(cache)
	r.pruneHeld(key, nodes)
	if op.kind == plan.Purge {
		r.ops.dropHeld(key)
		return
	}
	r.holdNodes(key, op, nodes, r.heldServed(key, op), p.Work, p.Invalid, op.kind == plan.Update)
}
