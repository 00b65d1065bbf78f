// Package heldledger is the one place where the facts about nodes held by
// the startup taint (--node-startup-taint) live: the ImageCache reconciler
// writes how each cache stands on each held node as its operations start,
// settle and end, and the startup-taint controller and the held-nodes
// metrics read them. Data flows one way: the reconciler writes, the ledger
// tells the startup-taint controller which nodes to look at again (Settled),
// and nobody writes back. The rules that turn the facts into a decision
// are the pure package hold; this package only keeps the facts, safely for
// concurrent use, which is why it is not part of hold.
//
// Neither a cache's status (its counts are not per node, its failures
// bounded) nor the Jobs (deleted as they settle) can say whether every
// (image, node) pair of a cache on a node is settled, so the ledger keeps a
// small record per held node and cache: the images still pending and those
// that failed. Only held nodes get one, so a cluster without the taint pays
// nothing; with the taint off there is no ledger at all, and every method
// of a nil *Ledger does nothing.
//
// The ledger lives in memory only, and needs not outlive the process: a
// node that still carries the taint after a restart counts as new to every
// cache (plan.ExistedAt), so a new-node operation settles its pairs again
// (those the node already reports need no Job) and makes a new record.
package heldledger

import (
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/kubefledged/kube-fledged/internal/hold"
)

// wakeBuffer bounds the wake-ups not read yet. A wake-up is dropped when
// it is full: the startup-taint controller's resync catches the node.
const wakeBuffer = 1024

// Ledger keeps, per cache, the UID-stamped facts of package hold: its
// running operation, the nodes its images were last put on, and its records
// of held nodes. Each part carries the cache's UID, so a cache deleted and
// recreated under its name never reads the old one's.
type Ledger struct {
	mu       sync.Mutex
	ops      map[types.NamespacedName]operation
	coverage map[types.NamespacedName]coverage
	held     map[types.NamespacedName]*records
	settled  chan event.TypedGenericEvent[*corev1.Node]
}

type operation struct {
	uid   types.UID
	purge bool
}

type coverage struct {
	uid   types.UID
	nodes map[string]bool
}

// records are a cache's records, by node.
type records struct {
	uid   types.UID
	nodes map[string]*Pulls
}

// Pulls are one cache's pulls on one held node: the images not settled
// yet, and those that failed.
type Pulls struct {
	Pending map[string]bool
	Failed  map[string]bool
}

func (p *Pulls) done() bool { return len(p.Pending) == 0 }

// Pair is one pull onto a held node that settled.
type Pair struct {
	Node, Image string
	Failed      bool
}

// New returns an empty ledger. Its wake-ups are buffered from the start:
// the ImageCache reconciler may settle a node before the startup-taint
// controller reads them.
func New() *Ledger {
	return &Ledger{ops: map[types.NamespacedName]operation{}, coverage: map[types.NamespacedName]coverage{},
		held: map[types.NamespacedName]*records{}, settled: make(chan event.TypedGenericEvent[*corev1.Node], wakeBuffer)}
}

// Settled are the wake-ups of the nodes on which every pair of a cache just
// settled, so that the startup-taint controller releases them now rather
// than at the cache's next status write. It has one reader.
func (l *Ledger) Settled() <-chan event.TypedGenericEvent[*corev1.Node] {
	return l.settled
}

// State says how cache k, of UID uid, stands on held node node.
func (l *Ledger) State(k types.NamespacedName, uid types.UID, node string) hold.CacheState {
	return hold.State(l.Facts(k, uid, node))
}

// Facts are what the ledger knows of cache k, of UID uid, and node.
func (l *Ledger) Facts(k types.NamespacedName, uid types.UID, node string) hold.Facts {
	var f hold.Facts
	if l == nil {
		return f
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if rs := l.held[k]; rs != nil && rs.uid == uid {
		if p := rs.nodes[node]; p != nil {
			f.Record = &hold.Record{Pending: sorted(p.Pending), Failed: sorted(p.Failed)}
		}
	}
	if op, ok := l.ops[k]; ok && op.uid == uid {
		f.Running, f.Purge = true, op.purge
	}
	if c, ok := l.coverage[k]; ok && c.uid == uid {
		f.CoverageKnown, f.Covered = true, c.nodes[node]
	}
	return f
}

// Records counts the records the ledger keeps, over every cache.
func (l *Ledger) Records() int {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, rs := range l.held {
		n += len(rs.nodes)
	}
	return n
}

func sorted(s map[string]bool) []string { return slices.Sorted(maps.Keys(s)) }

// wake tells the startup-taint controller about nodes, without blocking.
func (l *Ledger) wake(nodes []string) {
	for _, name := range nodes {
		n := &corev1.Node{}
		n.Name = name
		select {
		case l.settled <- event.TypedGenericEvent[*corev1.Node]{Object: n}:
		default:
		}
	}
}
