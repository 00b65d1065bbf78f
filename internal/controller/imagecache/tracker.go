package imagecache

import (
	"crypto/rand"
	"encoding/hex"
	"iter"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/controller/cachestatus"
	"github.com/kubefledged/kube-fledged/internal/heldledger"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/plan"
	"github.com/kubefledged/kube-fledged/internal/results"
)

// operation is the controller's memory of one running operation. It lives
// only while the operation runs: a restart aborts and re-runs every operation
// (the original's contract), so nothing here has to survive the process. The
// Jobs in the cluster, not this struct, say how the work went.
//
// It is what the operation is for (scope), the state of each of its pairs
// and Jobs (table), and the steps that run over them.
type operation struct {
	scope
	table pairTable

	// sweep says that a Job of the operation may be left in the cluster
	// under the delete policy (a delete failed, or a Job vanished from the
	// cache only): its end deletes whatever carries its label.
	sweep bool
	// backoff is the wait before the next retry of failed creates, due at
	// retryAt.
	backoff time.Duration
	retryAt time.Time

	counts v1alpha2.Counts
	pace   cachestatus.Pace

	// nextDeadline is the earliest deadline of an unsettled Job. Before it,
	// settling looks only at the Jobs whose events arrived; from it on, at
	// every Job, to find those that expired.
	nextDeadline time.Time

	// final is computed once, when every item is settled; retries of the
	// finishing writes reuse it.
	final *finalState
	// pins is the pin phase that follows the pulls, when the cache pins
	// (pinning.go); nil before, or when it does not.
	pins *pinPhase

	// held are the nodes carrying the startup taint whose records this
	// operation keeps (held.go); nil when there are none.
	held map[string]bool
}

// scope is what an operation is for: the cache, the images, the nodes,
// and what its start found. Its work, once planned, is in the table.
type scope struct {
	id         string
	kind       plan.Operation
	uid        types.UID
	generation int64
	// spec is what the operation acts on: the named images and those of
	// podImages; named is the cache's spec as written, which its end
	// records as processed.
	spec      v1alpha2.ImageCacheSpec
	named     v1alpha2.ImageCacheSpec
	podImages []v1alpha2.ListPodImages
	start     time.Time
	// eligible are the nodes the cache's lists could use at the start; they
	// become the cache's coverage when it ends.
	eligible map[string]bool
	// only are the nodes a NewNodes operation works on.
	only map[string]bool
	// joined are the nodes added while the operation ran (extend).
	joined map[string]bool
	// grown says that podImages grew while the operation ran (takeIn):
	// even a new-node operation's end records them then.
	grown bool
	// priorCoverage are the eligible nodes that existed when the cache's
	// previous operation started: its coverage, as far as the cluster tells,
	// for when the controller has none in memory.
	priorCoverage map[string]bool

	// skippedNodes are the nodes left out, with the reason of each;
	// lacking those of them that do not report every image (plan.Lacking).
	skippedNodes map[string]string
	lacking      map[string]string
	unmatched    []string
	// priorFailures are the failures the cache had when the operation
	// started: those on nodes it leaves out are not retried, so its end
	// keeps them (carryFailures).
	priorFailures map[string]v1alpha2.NodeReasonMessageList

	// pullUser is the UID of the pull containers, read from the
	// namespace when the operation started: its Jobs, retried creates
	// and joining nodes' among them, all run as the same user.
	pullUser int64

	// consumes are the on-demand annotations this operation acts on, with
	// the value each had at its start: its end removes them, unless a user
	// set them again meanwhile.
	consumes map[string]string
}

// joining says whether pods wait for node's images now: it is what a
// new-nodes operation is for, or it joined while the operation ran.
func (s *scope) joining(node string) bool { return s.kind == plan.NewNodes || s.joined[node] }

// joiningFirst puts the pending pairs of joining nodes first, each part in
// its order. Finding them reads all pending pairs, once per take, but only
// while nodes that joined the operation are in it.
func (s *scope) joiningFirst(pending iter.Seq[jobs.Pending]) iter.Seq[jobs.Pending] {
	if s.kind == plan.NewNodes || len(s.joined) == 0 {
		return pending
	}
	return func(yield func(jobs.Pending) bool) {
		for _, joined := range []bool{true, false} {
			for p := range pending {
				if s.joined[p.Work.Node.Name] == joined && !yield(p) {
					return
				}
			}
		}
	}
}

type finalState struct {
	items   []results.Item
	summary results.Summary
}

// tracker maps a cache to its running operation, and to the nodes its
// images were last put on (its coverage, from which new nodes are told).
// Keys carry the namespace, so same-named caches in two namespaces never
// share an entry; entries hold the cache UID, so a cache deleted and
// recreated under its name starts anew.
type tracker struct {
	mu       sync.Mutex
	ops      map[types.NamespacedName]*operation
	coverage map[types.NamespacedName]coverage
	// changed are the Jobs, per cache with a running operation, whose
	// events arrived since its last settle. Settling reads only these (and
	// the expired ones): reading every Job of a 10,000-Job operation at each
	// event made an operation quadratic in its size.
	changed map[types.NamespacedName]map[string]bool
	// nodesChanged are the caches with a running operation that a node
	// event concerned: a node may have become eligible meanwhile.
	nodesChanged map[types.NamespacedName]bool
	// ledger is told of every start and end of an operation and every
	// coverage, under mu so that it sees them in the tracker's order: the
	// startup-taint controller reads them there (package heldledger). Nil
	// with the taint off.
	ledger *heldledger.Ledger
	// followed are the caches that a pod, workload or namespace event
	// concerned: their running operation may have images to take in. Unlike
	// nodesChanged it is kept whether or not an operation runs, since an
	// event may fall between an operation's reading of the pods and its
	// start; a stale mark costs one look that finds nothing.
	followed map[types.NamespacedName]bool
}

type coverage struct {
	uid   types.UID
	nodes map[string]bool
}

// workOf is the work of Job j's pairs, in the order of its containers: a
// node Job's containers follow it.
func (o *operation) workOf(j *jobRecord) []jobs.Work {
	ws := make([]jobs.Work, len(j.pairs))
	for c, i := range j.pairs {
		ws[c] = o.table.pairs[i].work
	}
	return ws
}

func newTracker(ledger *heldledger.Ledger) *tracker {
	return &tracker{ops: map[types.NamespacedName]*operation{}, coverage: map[types.NamespacedName]coverage{},
		changed: map[types.NamespacedName]map[string]bool{}, nodesChanged: map[types.NamespacedName]bool{},
		followed: map[types.NamespacedName]bool{}, ledger: ledger}
}

// nodeChanged notes a node event that concerns cache k, if an operation runs.
func (t *tracker) nodeChanged(k types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ops[k] != nil {
		t.nodesChanged[k] = true
	}
}

// takeNodesChanged says whether a node event concerned cache k since the
// last call.
func (t *tracker) takeNodesChanged(k types.NamespacedName) bool {
	return t.take(t.nodesChanged, k)
}

// followedChanged notes a pod, workload or namespace event that concerns
// cache k.
func (t *tracker) followedChanged(k types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.followed[k] = true
}

// takeFollowedChanged says whether such an event concerned cache k since the
// last call.
func (t *tracker) takeFollowedChanged(k types.NamespacedName) bool {
	return t.take(t.followed, k)
}

// take clears cache k's mark in marks and says whether it was set.
func (t *tracker) take(marks map[types.NamespacedName]bool, k types.NamespacedName) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := marks[k]
	delete(marks, k)
	return c
}

// jobChanged notes an event of a Job of cache k. Caches with no running
// operation have nothing to settle, so nothing is kept for them.
func (t *tracker) jobChanged(k types.NamespacedName, job string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ops[k] == nil {
		return
	}
	if t.changed[k] == nil {
		t.changed[k] = map[string]bool{}
	}
	t.changed[k][job] = true
}

// podChanged notes an event of a pod of operation opID's Job job: in a node
// Job a container may finish while the Job's own status does not change. It
// returns the cache to wake, if the operation still runs.
func (t *tracker) podChanged(opID, job string) (types.NamespacedName, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, o := range t.ops {
		if o.id != opID {
			continue
		}
		if t.changed[k] == nil {
			t.changed[k] = map[string]bool{}
		}
		t.changed[k][job] = true
		return k, true
	}
	return types.NamespacedName{}, false
}

// takeChanged returns the Jobs of cache k with events since the last call,
// and forgets them: an event arriving after this call marks its Job again.
func (t *tracker) takeChanged(k types.NamespacedName) map[string]bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.changed[k]
	delete(t.changed, k)
	return c
}

func (t *tracker) get(k types.NamespacedName) *operation {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ops[k]
}

func (t *tracker) put(k types.NamespacedName, o *operation) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ops[k] = o
	t.ledger.Started(k, o.uid, o.kind == plan.Purge)
}

func (t *tracker) drop(k types.NamespacedName) *operation {
	t.mu.Lock()
	defer t.mu.Unlock()
	o := t.ops[k]
	delete(t.ops, k)
	delete(t.changed, k)
	delete(t.nodesChanged, k)
	t.ledger.Ended(k)
	return o
}

func (t *tracker) covered(k types.NamespacedName, uid types.UID) (map[string]bool, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.coverage[k]
	if !ok || c.uid != uid {
		return nil, false
	}
	return c.nodes, true
}

func (t *tracker) setCoverage(k types.NamespacedName, uid types.UID, nodes map[string]bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.coverage[k] = coverage{uid: uid, nodes: nodes}
	t.ledger.Cover(k, uid, nodes)
}

func (t *tracker) forget(k types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.ops, k)
	delete(t.coverage, k)
	delete(t.changed, k)
	delete(t.nodesChanged, k)
	delete(t.followed, k)
	t.ledger.Forget(k)
}

func newOperationID() string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
