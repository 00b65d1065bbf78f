package imagecache

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/plan"
	"github.com/kubefledged/kube-fledged/internal/results"
)

// operation is the controller's memory of one running operation. It lives
// only while the operation runs: a restart aborts and re-runs every operation
// (the original's contract), so nothing here has to survive the process. The
// Jobs in the cluster, not this struct, say how the work went.
type operation struct {
	id         string
	kind       plan.Operation
	uid        types.UID
	generation int64
	spec       v1alpha2.ImageCacheSpec
	start      time.Time
	deadline   time.Time

	work    []jobs.Work
	names   []string        // Job name of each work item
	created map[string]bool // Job names known to exist (or to have existed)
	// unstarted are items that failed without a Job (an invalid image, a node
	// whose runtime we cannot reach); they are settled from the start.
	unstarted []results.Item
	present   int

	// final is computed once, when every item is settled or the deadline
	// passed; retries of the finishing writes reuse it.
	final *finalState
}

type finalState struct {
	items   []results.Item
	byJob   map[string]results.Outcome
	summary results.Summary
}

func (o *operation) deleting() bool {
	if o.kind == plan.Purge {
		return true
	}
	for _, w := range o.work {
		if w.Kind == jobs.Pull {
			return false
		}
	}
	return o.kind == plan.Update && len(o.work) > 0
}

// tracker maps a cache to its running operation. Keys carry the namespace, so
// same-named caches in two namespaces never share an entry, and entries hold
// the cache UID, so a cache deleted and recreated under its name starts anew.
type tracker struct {
	mu  sync.Mutex
	ops map[types.NamespacedName]*operation
}

func newTracker() *tracker { return &tracker{ops: map[types.NamespacedName]*operation{}} }

func (t *tracker) get(k types.NamespacedName) *operation {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ops[k]
}

func (t *tracker) put(k types.NamespacedName, o *operation) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ops[k] = o
}

func (t *tracker) drop(k types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.ops, k)
}

func (t *tracker) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.ops)
}

func newOperationID() string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
