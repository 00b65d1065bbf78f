package imagecache

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/heldledger"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/plan"
	"github.com/kubefledged/kube-fledged/internal/results"
)

// The startup-taint controller asks, for each node that carries the taint
// and each cache that applies to it, whether every (image, node) pair of
// the cache on the node is settled. The reconciler writes what it knows
// into the ledger (package heldledger, Reconciler.Held) as its operations
// start and settle: the tracker its operations and coverage, this file the
// records of the held nodes, which only held nodes get.

// holdNodes records the pairs an operation is about to settle on the held
// nodes it serves: served are the nodes it pulls onto (all eligible ones, or
// the new or joined ones), merge adds to the records there are (an update
// pulls only what the nodes do not report) instead of replacing them, invalid are
// the spec's images that fail everywhere without a Job. A record with
// nothing pending is done at once (every image already present), and the
// ledger wakes the node.
func (r *Reconciler) holdNodes(key types.NamespacedName, op *operation, nodes []corev1.Node, served map[string]bool, work []jobs.Work, invalid map[string]string, merge bool) {
	if r.Config.StartupTaint == nil {
		return
	}
	fresh := map[string]*heldledger.Pulls{}
	for i := range nodes {
		n := &nodes[i]
		if served[n.Name] && r.Config.StartupTaint.On(n) {
			p := &heldledger.Pulls{Pending: map[string]bool{}, Failed: map[string]bool{}}
			for img := range invalid {
				p.Failed[img] = true
			}
			fresh[n.Name] = p
		}
	}
	if len(fresh) == 0 {
		return
	}
	for _, w := range work {
		if p := fresh[w.Node.Name]; p != nil && w.Kind == jobs.Pull {
			p.Pending[w.Image] = true
		}
	}
	if op.held == nil {
		op.held = map[string]bool{}
	}
	for n := range fresh {
		op.held[n] = true
	}
	r.Held.Hold(key, op.uid, fresh, merge)
}

// settleHeld updates the records of the held nodes among the settled Jobs.
func (r *Reconciler) settleHeld(key types.NamespacedName, op *operation, settled []int) {
	if len(op.held) == 0 {
		return
	}
	var pairs []heldledger.Pair
	for _, i := range settled {
		p := &op.table.pairs[i]
		w := p.work
		if w.Kind != jobs.Pull || !op.held[w.Node.Name] {
			continue
		}
		pairs = append(pairs, heldledger.Pair{Node: w.Node.Name, Image: w.Image, Failed: p.outcome.State != results.Succeeded})
	}
	if len(pairs) > 0 {
		r.Held.Settle(key, op.uid, pairs)
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
	r.Held.Prune(key, still)
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
		r.Held.Drop(key)
		return
	}
	r.holdNodes(key, op, nodes, r.heldServed(key, op), p.Work, p.Invalid, op.kind == plan.Update)
}
