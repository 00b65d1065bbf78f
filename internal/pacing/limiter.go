// Package pacing caps the Jobs in flight, across all caches and per node, so
// that a large cache never floods the API server or a node (#161), and shares
// the slots fairly between caches that want them.
package pacing

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Limiter hands out Job slots. A slot is held from a Job's creation until
// its result is settled.
type Limiter struct {
	mu      sync.Mutex
	max     int
	perNode int
	total   int
	nodes   map[string]int
	held    map[types.NamespacedName]int
	waiting map[types.NamespacedName]bool
	wake    func(types.NamespacedName)
}

// New returns a Limiter; max or perNode <= 0 means no cap. wake is called,
// without the lock held, for each owner that waited when slots free up.
func New(max, perNode int, wake func(types.NamespacedName)) *Limiter {
	return &Limiter{max: max, perNode: perNode, nodes: map[string]int{}, held: map[types.NamespacedName]int{},
		waiting: map[types.NamespacedName]bool{}, wake: wake}
}

// share is an owner's fair share of the global cap: the cap split evenly
// between the owners that hold or want slots.
func (l *Limiter) share(owner types.NamespacedName) int {
	owners := len(l.held)
	if _, ok := l.held[owner]; !ok {
		owners++
	}
	for w := range l.waiting {
		if _, ok := l.held[w]; !ok && w != owner {
			owners++
		}
	}
	s := (l.max + owners - 1) / owners
	return max(s, 1)
}

// TryAcquire takes a slot for a Job of owner on node, or says no and
// remembers that owner waits. An owner that waits is counted in the fair
// share until Forget.
func (l *Limiter) TryAcquire(owner types.NamespacedName, node string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if (l.max > 0 && (l.total >= l.max || l.held[owner] >= l.share(owner))) ||
		(l.perNode > 0 && l.nodes[node] >= l.perNode) {
		l.waiting[owner] = true
		return false
	}
	l.total++
	l.nodes[node]++
	l.held[owner]++
	return true
}

// Release returns a slot and wakes the owners that waited for one.
func (l *Limiter) Release(owner types.NamespacedName, node string) {
	l.mu.Lock()
	if l.held[owner] > 0 {
		l.total--
		l.held[owner]--
		if l.held[owner] == 0 {
			delete(l.held, owner)
		}
		if l.nodes[node]--; l.nodes[node] <= 0 {
			delete(l.nodes, node)
		}
	}
	// Waiters stay registered (they count for the fair share) until they
	// get a slot or end; each is woken to try again.
	var wake []types.NamespacedName
	for w := range l.waiting {
		if w != owner {
			wake = append(wake, w)
		}
	}
	l.mu.Unlock()
	if l.wake != nil {
		for _, w := range wake {
			l.wake(w)
		}
	}
}

// Forget drops an owner's wait (its operation ended or its cache is gone).
func (l *Limiter) Forget(owner types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.waiting, owner)
}

// InFlight is the number of slots held.
func (l *Limiter) InFlight() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}
