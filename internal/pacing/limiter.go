// Package pacing caps the image pulls and deletes in flight, across all
// caches and per node, so that a large cache never floods the API server or
// a node (#161), and shares the slots fairly between caches that want them.
//
// A slot is one pull (or delete) that may be running at a given moment, not
// one image of a Job: the kubelet starts a pod's containers one after
// another, pulling each one's image before it starts the next, so a node
// Job with ten images pulls one of them at a time. Such a Job takes one
// slot, and a node under the default caps gets all its images in one Job
// instead of a series of small ones, each paying the Job controller's round
// trip. A node declared to pull in parallel (LabelParallelPulls) is counted
// as if its Job's pulls could all run at once, up to what it declares.
package pacing

import (
	"math"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// LabelParallelPulls is the node label that declares how many of one pod's
// image pulls the node may run at once. Without it a node Job counts as one
// pull in flight, which is what the kubelet does; a cluster whose nodes pull
// a pod's images otherwise says so here, and its node Jobs are sized and
// counted by it.
const LabelParallelPulls = "kubefledged.io/parallel-image-pulls"

// Unbounded is the parallelism of a node whose label is not a positive
// integer: each of a Job's pulls is counted, the safe count when we cannot
// tell.
const Unbounded = math.MaxInt32

// ParallelPulls reads LabelParallelPulls from a node's labels: 1 when it is
// absent; Unbounded, with the error, when it is not a positive integer.
func ParallelPulls(labels map[string]string) (int, error) {
	v, ok := labels[LabelParallelPulls]
	if !ok {
		return 1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return Unbounded, &labelError{value: v}
	}
	return n, nil
}

type labelError struct{ value string }

func (e *labelError) Error() string {
	return "node label " + LabelParallelPulls + "=" + strconv.Quote(e.value) +
		" is not a positive integer: every pull of the node's Jobs is counted as in flight"
}

// Size is the pure decision behind Take: how many of pending pulls one Job
// does (size) and the slots it holds while it runs (slots), on a node that
// runs up to parallel of one pod's pulls at once, when free slots are left.
// A Job holds one slot per pull that may run at the same time: min(size,
// parallel). When that does not fit, the Job shrinks to the free slots, each
// of its pulls counted, as a Job per image would be. 0, 0: nothing fits.
func Size(pending, parallel, free int) (size, slots int) {
	if pending <= 0 || free <= 0 {
		return 0, 0
	}
	parallel = max(parallel, 1)
	if w := min(pending, parallel); w <= free {
		return pending, w
	}
	return free, free
}

// Limiter hands out slots. A Job holds its slots from its creation until
// its result is settled.
type Limiter struct {
	mu      sync.Mutex
	perNode int
	total   int
	nodes   map[string]int
	held    map[types.NamespacedName]int
	waiting map[types.NamespacedName]bool
	wake    func(types.NamespacedName)
	window  *Window
}

// New returns a Limiter; max or perNode <= 0 means no cap. target is the
// Job start delay the Window keeps to under max (0: no window). wake is
// called, without the lock held, for each owner that waited when slots free
// up.
func New(max, perNode int, target time.Duration, wake func(types.NamespacedName)) *Limiter {
	return &Limiter{perNode: perNode, nodes: map[string]int{}, held: map[types.NamespacedName]int{},
		waiting: map[types.NamespacedName]bool{}, wake: wake, window: NewWindow(max, target)}
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
	limit := l.window.Limit()
	s := (limit + owners - 1) / owners
	return max(s, 1)
}

// othersWait says whether an owner other than owner waits for a slot.
func (l *Limiter) othersWait(owner types.NamespacedName) bool {
	for w := range l.waiting {
		if w != owner {
			return true
		}
	}
	return false
}

// free is what owner may still take on node under every cap. The fair
// share binds only while another owner waits: a small cache that has all
// the slots it wants leaves the rest of the cap to the large one, and one
// that arrives while a large one holds the cap takes every slot freed
// until it has its share, so its time is bounded by its own size.
//
// An owner that holds no slot may go one past the window, never past the
// cap: a cache created while a large one fills the window starts at once
// instead of at the large one's next release, and one Job per cache is
// no queue for the Job controller.
//
// So may a node that joined (joining) and holds no slot, past the fair
// share too: its pods are scheduled now, or wait for its startup taint to
// go, while the window and the share only order bulk work whose end nobody
// waits on by the second. Metering it made a node joining a complete
// cluster wait up to 8 s for its first Job (benchmark scenario 2), to
// save the Job controller a queue it cleared as fast. One Job per joining
// node at a time is the most this lets out past the window; the caps
// still bind.
func (l *Limiter) free(owner types.NamespacedName, node string, joining bool) int {
	f := l.room(owner, joining && l.nodes[node] == 0)
	if l.perNode > 0 {
		f = min(f, l.perNode-l.nodes[node])
	}
	return f
}

// room is free's part that holds on every node alike: the window and the
// fair share, which a newNode (joining, holding no slot) may pass.
func (l *Limiter) room(owner types.NamespacedName, newNode bool) int {
	f := math.MaxInt
	if limit := l.window.Limit(); limit > 0 {
		room := limit - l.total
		if room <= 0 && (l.held[owner] == 0 || newNode) && (l.window.max <= 0 || l.total < l.window.max) {
			room = 1
		}
		f = min(f, room)
		if l.othersWait(owner) && !newNode {
			f = min(f, l.share(owner)-l.held[owner])
		}
	}
	return f
}

// Spent says whether owner can take no slot now on any node but a joining
// one's: the window or its fair share is used up. A caller laying out Jobs
// stops asking there, rather than asking once per node waiting: that, and
// its garbage, was most of the controller's CPU in benchmark scenario 1.
func (l *Limiter) Spent(owner types.NamespacedName) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.room(owner, false) <= 0
}

// Take takes the slots for one Job of owner on node that would do up to
// pending pulls (1 for a Job per image or a delete), on a node that runs up
// to parallel of one pod's pulls at once (see Size). It returns how many of
// the pulls the Job does and the slots it holds, to be given back with
// Release; 0, 0 when nothing fits, and then owner is remembered as waiting
// and counted in the fair share until Forget.
func (l *Limiter) Take(owner types.NamespacedName, node string, pending, parallel int) (size, slots int) {
	return l.take(owner, node, pending, parallel, false)
}

// TakeJoining is Take for a Job on a node that joined while its owner's
// operation ran, or that a new-nodes operation is for: while the node holds
// no slot, the window and the fair share do not hold it back (see free).
func (l *Limiter) TakeJoining(owner types.NamespacedName, node string, pending, parallel int) (size, slots int) {
	return l.take(owner, node, pending, parallel, true)
}

func (l *Limiter) take(owner types.NamespacedName, node string, pending, parallel int, joining bool) (size, slots int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	size, slots = Size(pending, parallel, l.free(owner, node, joining))
	if size == 0 {
		l.waiting[owner] = true
		return 0, 0
	}
	l.total += slots
	l.nodes[node] += slots
	l.held[owner] += slots
	return size, slots
}

// Release gives back slots taken by Take and wakes the owners that waited.
func (l *Limiter) Release(owner types.NamespacedName, node string, slots int) {
	l.mu.Lock()
	if slots = min(slots, l.held[owner]); slots > 0 {
		l.total -= slots
		l.held[owner] -= slots
		if l.held[owner] == 0 {
			delete(l.held, owner)
		}
		if l.nodes[node] -= slots; l.nodes[node] <= 0 {
			delete(l.nodes, node)
		}
	}
	// Waiters stay registered (they count for the fair share) until they
	// get a slot or end; each is woken to try again.
	l.wakeWaiters(owner)
}

// wakeWaiters unlocks l and wakes every waiting owner but except.
func (l *Limiter) wakeWaiters(except types.NamespacedName) {
	var wake []types.NamespacedName
	for w := range l.waiting {
		if w != except {
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

// Sent notes that Job job (namespace/name) was created at now, for the
// Window to time its start.
func (l *Limiter) Sent(job string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.window.Sent(job, now)
}

// Started notes that Job job was seen started at now (see
// Window.Started); when the window grows, the owners that waited are woken.
func (l *Limiter) Started(job string, now time.Time) {
	l.mu.Lock()
	if !l.window.Started(job, now) {
		l.mu.Unlock()
		return
	}
	l.wakeWaiters(types.NamespacedName{})
}

// Gone forgets a Job deleted or settled before it was seen to start.
func (l *Limiter) Gone(job string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.window.Gone(job)
}

// Overdue shrinks the window when a Job is still unstarted long past the
// target at now (see Window.Overdue).
func (l *Limiter) Overdue(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.window.Overdue(now)
}

// Limit is the cap on the slots held now: the window's size under
// --max-concurrent-jobs (0: no cap).
func (l *Limiter) Limit() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.window.Limit()
}

// Forget drops an owner's wait (its operation ended or its cache is gone).
func (l *Limiter) Forget(owner types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.waiting, owner)
}

// InFlight is the number of slots held: the pulls and deletes that may be
// running at once.
func (l *Limiter) InFlight() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}
