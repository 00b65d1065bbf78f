package imagecache

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kubefledged/kube-fledged/internal/results"
)

// pinLedger is what this process pinned, per cache (by UID), node and
// image. It lives in memory only: after a restart every cache's first
// operation pins its images again, which changes nothing on a node where
// they were (the helper sets only what is missing), and rebuilds it.
type pinLedger struct {
	mu     sync.Mutex
	caches map[types.UID]*cachePins
	// unpinJobs are when each unpin Job of a cache was created, or first
	// seen by this process: a Job's deadline counts from there, so Jobs
	// held back by the cap do not expire while they wait.
	unpinJobs map[types.UID]map[string]time.Time
	// unpinned are the caches whose unpinning is over, by UID, with their
	// keys: the writes that follow it (status, finalizer) may be retried
	// without running its Jobs again, and so may the reconciles that read a
	// deleted cache from an informer that has not yet seen its finalizer go.
	// An entry goes when the cache pins again or is read gone.
	unpinned map[types.UID]types.NamespacedName
}

type cachePins struct {
	// pinned maps an image to the nodes it is pinned on.
	pinned map[string]map[string]bool
	// unsupported are the nodes whose runtime cannot pin.
	unsupported map[string]bool
	// failed are the pins that failed, by image and node.
	failed map[pinPair]string
}

type pinPair struct{ image, node string }

func newPinLedger() *pinLedger {
	return &pinLedger{caches: map[types.UID]*cachePins{}, unpinJobs: map[types.UID]map[string]time.Time{}, unpinned: map[types.UID]types.NamespacedName{}}
}

// unpinJobSince is when unpin Job job of the cache started: now at the
// first ask.
func (l *pinLedger) unpinJobSince(uid types.UID, job string, now time.Time) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.unpinJobs[uid] == nil {
		l.unpinJobs[uid] = map[string]time.Time{}
	}
	if t, ok := l.unpinJobs[uid][job]; ok {
		return t
	}
	l.unpinJobs[uid][job] = now
	return now
}

func (l *pinLedger) of(uid types.UID) *cachePins {
	c := l.caches[uid]
	if c == nil {
		c = &cachePins{pinned: map[string]map[string]bool{}, unsupported: map[string]bool{}, failed: map[pinPair]string{}}
		l.caches[uid] = c
	}
	return c
}

// has says whether image is pinned on node for the cache.
func (l *pinLedger) has(uid types.UID, image, node string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.caches[uid]
	return c != nil && c.pinned[image][node]
}

// known says whether this process has pinned, or tried to pin, for the
// cache since it started.
func (l *pinLedger) known(uid types.UID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.caches[uid] != nil
}

// unsupported records the nodes whose runtime cannot pin.
func (l *pinLedger) unsupported(uid types.UID, nodes map[string]string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.of(uid)
	for n := range nodes {
		c.unsupported[n] = true
	}
}

// record takes in what a pin Job did on node.
func (l *pinLedger) record(uid types.UID, node string, o results.PinOutcome) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.of(uid)
	if o.Unsupported != "" {
		c.unsupported[node] = true
		return
	}
	for _, img := range o.Done {
		if c.pinned[img] == nil {
			c.pinned[img] = map[string]bool{}
		}
		c.pinned[img][node] = true
		delete(c.failed, pinPair{img, node})
	}
	for img, why := range o.Failed {
		c.failed[pinPair{img, node}] = why
	}
}

// unwanted are, by node, the images the cache pinned and wants no more,
// less the pairs whose pins a delete Job released: images that fromPods or
// fromWorkloads dropped stay on the nodes for the kubelet to collect, which
// our pin would forbid for good.
func (l *pinLedger) unwanted(uid types.UID, wanted map[string]bool, released map[pinPair]bool) map[string][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.caches[uid]
	if c == nil {
		return nil
	}
	out := map[string][]string{}
	for img, nodes := range c.pinned {
		if wanted[img] {
			continue
		}
		for n := range nodes {
			if !released[pinPair{img, n}] {
				out[n] = append(out[n], img)
			}
		}
	}
	for _, imgs := range out {
		slices.Sort(imgs)
	}
	return out
}

// keep forgets the images the cache no longer wants: its delete Jobs
// released their pins (--unpin-owner).
func (l *pinLedger) keep(uid types.UID, wanted map[string]bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.caches[uid]
	if c == nil {
		return
	}
	for img := range c.pinned {
		if !wanted[img] {
			delete(c.pinned, img)
		}
	}
	for p := range c.failed {
		if !wanted[p.image] {
			delete(c.failed, p)
		}
	}
}

// forget drops a cache: purged, deleted, or no longer pinning.
func (l *pinLedger) forget(uid types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.caches, uid)
	delete(l.unpinJobs, uid)
}

// setUnpinned records that the cache's unpinning is over.
func (l *pinLedger) setUnpinned(uid types.UID, key types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unpinned[uid] = key
}

// pinsAgain forgets that the cache's unpinning was over: it pins again, and
// stopping will need its unpin Jobs anew.
func (l *pinLedger) pinsAgain(uid types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.unpinned, uid)
	delete(l.unpinJobs, uid)
}

// gone forgets the caches under key that were unpinned: a read found key
// gone, and no later read can show them again.
func (l *pinLedger) gone(key types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for uid, k := range l.unpinned {
		if k == key {
			delete(l.unpinned, uid)
		}
	}
}

// isUnpinned says whether the cache's unpinning is over.
func (l *pinLedger) isUnpinned(uid types.UID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, over := l.unpinned[uid]
	return over
}
