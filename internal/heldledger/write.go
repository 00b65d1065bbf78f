package heldledger

import "k8s.io/apimachinery/pkg/types"

// The ImageCache reconciler's side. Every method does nothing on a nil
// ledger: with the taint off, the reconciler writes to none.

// Started records that an operation of cache k runs.
func (l *Ledger) Started(k types.NamespacedName, uid types.UID, purge bool) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ops[k] = operation{uid: uid, purge: purge}
}

// Ended records that no operation of cache k runs.
func (l *Ledger) Ended(k types.NamespacedName) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.ops, k)
}

// Cover records the nodes the images of cache k were last put on. The
// ledger keeps nodes as it is: the caller never changes it afterwards.
func (l *Ledger) Cover(k types.NamespacedName, uid types.UID, nodes map[string]bool) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.coverage[k] = coverage{uid: uid, nodes: nodes}
}

// Forget drops every fact of cache k: it is gone.
func (l *Ledger) Forget(k types.NamespacedName) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.ops, k)
	delete(l.coverage, k)
	delete(l.held, k)
}

// Hold sets the records of the held nodes an operation of cache k is about
// to settle, replacing those there are or, with merge (an update pulls only
// what the nodes do not report), adding to them. The ledger keeps fresh's
// Pulls. A record with nothing pending is done at once (every image already
// present) and its node is woken.
func (l *Ledger) Hold(k types.NamespacedName, uid types.UID, fresh map[string]*Pulls, merge bool) {
	if l == nil {
		return
	}
	l.wake(l.hold(k, uid, fresh, merge))
}

func (l *Ledger) hold(k types.NamespacedName, uid types.UID, fresh map[string]*Pulls, merge bool) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	rs := l.held[k]
	if rs == nil || rs.uid != uid {
		rs = &records{uid: uid, nodes: map[string]*Pulls{}}
		l.held[k] = rs
	}
	var done []string
	for n, p := range fresh {
		if old := rs.nodes[n]; merge && old != nil {
			for img := range old.Pending {
				p.Pending[img] = true
			}
			for img := range old.Failed {
				// An update pulls again what failed: its new
				// result, not the old one, decides.
				if !p.Pending[img] {
					p.Failed[img] = true
				}
			}
		}
		rs.nodes[n] = p
		if p.done() {
			done = append(done, n)
		}
	}
	return done
}

// Settle records settled pairs of cache k and wakes the nodes whose record
// became done.
func (l *Ledger) Settle(k types.NamespacedName, uid types.UID, pairs []Pair) {
	if l == nil {
		return
	}
	l.wake(l.settle(k, uid, pairs))
}

func (l *Ledger) settle(k types.NamespacedName, uid types.UID, pairs []Pair) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	rs := l.held[k]
	if rs == nil || rs.uid != uid {
		return nil
	}
	var done []string
	for _, pr := range pairs {
		p := rs.nodes[pr.Node]
		if p == nil || !p.Pending[pr.Image] {
			continue
		}
		delete(p.Pending, pr.Image)
		if pr.Failed {
			p.Failed[pr.Image] = true
		} else {
			delete(p.Failed, pr.Image)
		}
		if p.done() {
			done = append(done, pr.Node)
		}
	}
	return done
}

// Prune keeps the records of cache k of the nodes in still only: node
// deletions are not watched, and a released node is never asked about.
func (l *Ledger) Prune(k types.NamespacedName, still map[string]bool) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	rs := l.held[k]
	if rs == nil {
		return
	}
	for n := range rs.nodes {
		if !still[n] {
			delete(rs.nodes, n)
		}
	}
	if len(rs.nodes) == 0 {
		delete(l.held, k)
	}
}

// Drop drops the records of cache k, of a purge: it wants nothing on any
// node.
func (l *Ledger) Drop(k types.NamespacedName) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.held, k)
}

// Released drops every cache's record of a node that no longer carries the
// taint.
func (l *Ledger) Released(node string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, rs := range l.held {
		delete(rs.nodes, node)
		if len(rs.nodes) == 0 {
			delete(l.held, k)
		}
	}
}
