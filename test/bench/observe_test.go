package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/plan"
	"github.com/kubefledged/kube-fledged/test/framework"
)

// Everything the benchmark reports about Jobs and caches is observed from
// the API server through watches, the way a user would see it, not taken
// from the controller's own counters. Times are when the event reached the
// benchmark, which is finer than the API's one-second timestamps.

// jobWatch follows the Jobs of one namespace: how many are unfinished at
// once (overall and per node), when each node's first and last Job appeared
// and finished.
type jobWatch struct {
	mu          sync.Mutex
	open        map[string]string // unfinished Jobs: name -> node
	openPerNode map[string]int
	seen        map[string]bool
	done        map[string]bool
	nodes       map[string]*nodeJobs

	peak, peakPerNode int
	succeeded, failed int
	deletedUnfinished int
	// pairs and pairsDone count the pulls in the Jobs seen and finished.
	// A node Job the controller deleted unfinished counts as finished: it
	// does so only once every container has its result (the Job
	// controller has not always said Complete by then), or at the deadline.
	pairs, pairsDone  int
	firstAdd, lastAdd time.Time
	lastDone          time.Time
}

// annotationPairs carries, on the watch's copy of a Job, how many (image,
// node) pairs it works on.
const annotationPairs = "bench.kubefledged.io/pairs"

// nodeJobs counts (image, node) pairs, not Jobs: a node's pull Job holds
// several.
type nodeJobs struct {
	added, done       int
	firstAdd, lastAdd time.Time
	lastDone          time.Time
}

func watchJobs(ctx context.Context, kube kubernetes.Interface, ns string) (*jobWatch, error) {
	w := &jobWatch{open: map[string]string{}, openPerNode: map[string]int{}, seen: map[string]bool{}, done: map[string]bool{}, nodes: map[string]*nodeJobs{}}
	lw := toolscache.NewListWatchFromClient(kube.BatchV1().RESTClient(), "jobs", ns, fields.Everything())
	// Only metadata and conditions matter here; 10,000 pod templates would
	// cost the benchmark's process memory for nothing.
	strip := func(obj any) (any, error) {
		if j, ok := obj.(*batchv1.Job); ok {
			// How many pulls it holds (a node's pull Job has one container
			// per image) is all that is kept of its spec.
			if j.Annotations == nil {
				j.Annotations = map[string]string{}
			}
			j.Annotations[annotationPairs] = strconv.Itoa(len(jobs.ImagesOf(j)))
			j.Spec = batchv1.JobSpec{}
			j.ManagedFields = nil
		}
		return obj, nil
	}
	err := framework.Inform(ctx, lw, &batchv1.Job{}, strip, w.update)
	return w, err
}

func (w *jobWatch) update(typ watch.EventType, j *batchv1.Job, _ bool) {
	deleted := typ == watch.Deleted
	now := time.Now()
	node := j.Annotations[jobs.AnnotationNode]
	w.mu.Lock()
	defer w.mu.Unlock()
	n := w.nodes[node]
	if n == nil {
		n = &nodeJobs{}
		w.nodes[node] = n
	}
	pairs, _ := strconv.Atoi(j.Annotations[annotationPairs])
	pairs = max(pairs, 1)
	_, perPair := j.Annotations[jobs.AnnotationImage]
	if !w.seen[j.Name] {
		w.seen[j.Name] = true
		w.pairs += pairs
		n.added += pairs
		if n.firstAdd.IsZero() {
			n.firstAdd = now
		}
		n.lastAdd = now
		if w.firstAdd.IsZero() {
			w.firstAdd = now
		}
		w.lastAdd = now
		if !deleted && !w.done[j.Name] {
			w.open[j.Name] = node
			w.openPerNode[node]++
			w.peak = max(w.peak, len(w.open))
			w.peakPerNode = max(w.peakPerNode, w.openPerNode[node])
		}
	}
	state := framework.JobOutcome(j)
	if state == "" && !deleted {
		return
	}
	if _, isOpen := w.open[j.Name]; isOpen {
		delete(w.open, j.Name)
		w.openPerNode[node]--
	}
	if w.done[j.Name] {
		return
	}
	switch state {
	case "":
		w.deletedUnfinished++
		if perPair || j.Labels[jobs.LabelKind] != string(jobs.Pull) {
			return
		}
	case batchv1.JobComplete:
		w.succeeded++
	default:
		w.failed++
	}
	w.done[j.Name] = true
	w.pairsDone += pairs
	n.done += pairs
	n.lastDone = now
	w.lastDone = now
}

func (w *jobWatch) figures() jobFigures {
	w.mu.Lock()
	defer w.mu.Unlock()
	return jobFigures{Created: len(w.seen), Succeeded: w.succeeded, Failed: w.failed, DeletedUnfinished: w.deletedUnfinished,
		PeakInFlight: w.peak, PeakInFlightNode: w.peakPerNode, Pairs: w.pairs, PairsDone: w.pairsDone}
}

// waitFinished waits until n Jobs have finished and returns when the last
// one did.
func (w *jobWatch) waitFinished(ctx context.Context, n int) (time.Time, error) {
	for {
		w.mu.Lock()
		finished, last := len(w.done), w.lastDone
		w.mu.Unlock()
		if finished >= n {
			return last, nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%d of %d Jobs finished: %w", finished, n, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// caughtUp waits, for d at most, until no Job the watch has seen is
// still open: each has finished or gone. It returns how many still are.
func (w *jobWatch) caughtUp(ctx context.Context, d time.Duration) int {
	open := func() int {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.open)
	}
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, d, true, func(context.Context) (bool, error) { return open() == 0, nil })
	return open()
}

func (w *jobWatch) node(name string) nodeJobs { return copyOf(&w.mu, w.nodes, name) }

// copyOf is a copy of what m holds under key, or the zero value, read under mu: what a
// watch keeps per node changes under the caller's feet.
func copyOf[V any](mu *sync.Mutex, m map[string]*V, key string) V {
	mu.Lock()
	defer mu.Unlock()
	if v := m[key]; v != nil {
		return *v
	}
	var zero V
	return zero
}

// createdOn counts the Jobs seen on nodes not in the set.
func (w *jobWatch) createdOutside(set map[string]bool) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for name, nj := range w.nodes {
		if !set[name] {
			n += nj.added
		}
	}
	return n
}

// cacheWatch follows the ImageCaches of one namespace.
type cacheWatch struct {
	mu     sync.Mutex
	events map[string][]cacheEvent
}

type cacheEvent struct {
	at    time.Time
	cache *v1alpha2.ImageCache
}

func watchCaches(ctx context.Context, c client.WithWatch, ns string) (*cacheWatch, error) {
	w := &cacheWatch{events: map[string][]cacheEvent{}}
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			l := &v1alpha2.ImageCacheList{}
			return l, c.List(ctx, l, &client.ListOptions{Namespace: ns, Raw: &o})
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(ctx, &v1alpha2.ImageCacheList{}, &client.ListOptions{Namespace: ns, Raw: &o})
		},
	}
	err := framework.Inform(ctx, lw, &v1alpha2.ImageCache{}, nil, func(typ watch.EventType, ic *v1alpha2.ImageCache, _ bool) {
		if typ == watch.Deleted {
			return
		}
		w.mu.Lock()
		w.events[ic.Name] = append(w.events[ic.Name], cacheEvent{at: time.Now(), cache: ic})
		w.mu.Unlock()
	})
	return w, err
}

// watchNamespace starts the two watches every measured phase reads: the Jobs
// and the caches of ns.
func (e *env) watchNamespace(ctx context.Context, ns string) (*jobWatch, *cacheWatch, error) {
	jw, err := watchJobs(ctx, e.kube, ns)
	if err != nil {
		return nil, nil, err
	}
	cw, err := watchCaches(ctx, e.k8s, ns)
	return jw, cw, err
}

// final waits for the cache to end an operation of the given reason that
// started at or after `after`, and returns when that was seen.
func (w *cacheWatch) final(ctx context.Context, name, reason string, after time.Time) (time.Time, *v1alpha2.ImageCache, error) {
	for {
		if at, c := w.finalSince(name, reason, after); c != nil {
			return at, c, nil
		}
		select {
		case <-ctx.Done():
			last := "(none)"
			w.mu.Lock()
			if ev := w.events[name]; len(ev) > 0 {
				st := ev[len(ev)-1].cache.Status
				last = fmt.Sprintf("%s/%s %s", st.Status, st.Reason, st.Progress)
			}
			w.mu.Unlock()
			return time.Time{}, nil, fmt.Errorf("cache %s: no final %s since %s (last status %s): %w", name, reason, after.Format(time.TimeOnly), last, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (w *cacheWatch) finalSince(name, reason string, after time.Time) (time.Time, *v1alpha2.ImageCache) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ev := range w.events[name] {
		st := ev.cache.Status
		if isFinal(ev.cache, reason) && !st.StartTime.Time.Before(after.Truncate(time.Second)) {
			return ev.at, ev.cache
		}
	}
	return time.Time{}, nil
}

func isFinal(c *v1alpha2.ImageCache, reason string) bool {
	st := c.Status
	return st.Status != "" && st.Status != v1alpha2.ImageCacheActionStatusProcessing &&
		st.Reason == reason && st.CompletionTime != nil && st.StartTime != nil
}

// operations counts the operations of a cache that started at or after
// `after`: its status turned Processing with a new start time.
func (w *cacheWatch) operations(name string, after time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	starts := map[time.Time]bool{}
	for _, ev := range w.events[name] {
		st := ev.cache.Status
		if st.Status == v1alpha2.ImageCacheActionStatusProcessing && st.StartTime != nil && !st.StartTime.Time.Before(after.Truncate(time.Second)) {
			starts[st.StartTime.Time] = true
		}
	}
	return len(starts)
}

// nodeWatch records, per node, when it was first seen (its creation, to
// the watch's precision rather than the whole second of its
// creationTimestamp), first seen Ready, and, with a startup taint, first
// seen without it after it was seen with it.
type nodeWatch struct {
	mu    sync.Mutex
	nodes map[string]*nodeHold
}

type nodeHold struct {
	created, ready, released time.Time
	tainted                  bool
}

func watchNodes(ctx context.Context, kube kubernetes.Interface, taint *plan.StartupTaint) (*nodeWatch, error) {
	w := &nodeWatch{nodes: map[string]*nodeHold{}}
	lw := toolscache.NewListWatchFromClient(kube.CoreV1().RESTClient(), "nodes", "", fields.Everything())
	err := framework.Inform(ctx, lw, &corev1.Node{}, nil, func(typ watch.EventType, n *corev1.Node, _ bool) {
		if typ == watch.Deleted {
			return
		}
		now := time.Now()
		w.mu.Lock()
		defer w.mu.Unlock()
		h := w.nodes[n.Name]
		if h == nil {
			h = &nodeHold{created: now}
			w.nodes[n.Name] = h
		}
		if h.ready.IsZero() && plan.Ready(n) {
			h.ready = now
		}
		switch {
		case taint.On(n):
			h.tainted = true
		case h.tainted && h.released.IsZero():
			h.released = now
		}
	})
	return w, err
}

func (w *nodeWatch) ready(name string) (time.Time, bool) {
	h := w.node(name)
	return h.ready, !h.ready.IsZero()
}

func (w *nodeWatch) node(name string) nodeHold { return copyOf(&w.mu, w.nodes, name) }

// released counts the named nodes seen released.
func (w *nodeWatch) released(names []string) int {
	return len(names) - len(w.held(names))
}

// held are the named nodes not seen released.
func (w *nodeWatch) held(names []string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, n := range names {
		if h := w.nodes[n]; h == nil || h.released.IsZero() {
			out = append(out, n)
		}
	}
	return out
}

// finalObjects returns the distinct finished operations of the given reason
// that started at or after `after`.
func (w *cacheWatch) finalObjects(name, reason string, after time.Time) []*v1alpha2.ImageCache {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := map[time.Time]bool{}
	var out []*v1alpha2.ImageCache
	for _, ev := range w.events[name] {
		st := ev.cache.Status
		if isFinal(ev.cache, reason) && !st.StartTime.Time.Before(after.Truncate(time.Second)) && !seen[st.StartTime.Time] {
			seen[st.StartTime.Time] = true
			out = append(out, ev.cache)
		}
	}
	return out
}

func (w *cacheWatch) finals(name, reason string, after time.Time) int {
	return len(w.finalObjects(name, reason, after))
}

// anyProcessing tells whether one of the caches runs an operation.
func (w *cacheWatch) anyProcessing(names []string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range names {
		ev := w.events[n]
		if len(ev) == 0 || ev[len(ev)-1].cache.Status.Status == v1alpha2.ImageCacheActionStatusProcessing {
			return true
		}
	}
	return false
}

// progress returns how many pulls finished and when a Job last appeared or
// finished.
func (w *jobWatch) progress() (int, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	last := w.lastAdd
	if w.lastDone.After(last) {
		last = w.lastDone
	}
	return w.pairsDone, last
}

// inFlight is how many Jobs are open now: created, neither finished nor gone.
func (w *jobWatch) inFlight() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.open)
}

// settledNow tells whether the cache's latest state is a final one of the
// given reason, and when it first reached that state for good: a burst of
// joining nodes may take several operations, and only the last one's end
// counts.
func (w *cacheWatch) settledNow(name, reason string) (time.Time, *v1alpha2.ImageCache, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ev := w.events[name]
	i := len(ev)
	for i > 0 && isFinal(ev[i-1].cache, reason) {
		i--
	}
	if i == len(ev) {
		return time.Time{}, nil, false
	}
	return ev[i].at, ev[len(ev)-1].cache, true
}

// times returns when the first Job appeared, the last appeared, and the
// last finished.
func (w *jobWatch) times() (firstAdd, lastAdd, lastDone time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.firstAdd, w.lastAdd, w.lastDone
}
