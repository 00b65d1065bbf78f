package bench

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/plan"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

func (e *env) coldCache() (*coldResult, error) {
	nodes, imgs := nodeNames("sandbox-node-", e.cfg.Nodes), imageNames(e.cfg.Images)
	r := &coldResult{Run: e.runInfo(), Nodes: len(nodes), Images: len(imgs), Pairs: len(nodes) * len(imgs)}
	fl, err := e.floor("scenario 1", "s1-floor", nodes, imgs)
	r.Floor = fl
	if err != nil {
		return r, err
	}
	r.Runs, err = e.coldRuns("scenario 1", "s1", fl, imgs, r.Pairs, true)
	return r, err
}

// coldRuns measures our controller on a cold cache of imgs on every node, with caps
// that cannot bind and then with the defaults, each against the floor fl; the
// namespaces are prefix-open and prefix-default.
func (e *env) coldRuns(label, prefix string, fl *floorResult, imgs []string, pairs int, profile bool) ([]*phase, error) {
	var runs []*phase
	for _, run := range []struct {
		ns   string
		caps caps
	}{{prefix + "-open", openCaps(pairs, len(imgs))}, {prefix + "-default", defaultCaps}} {
		p, _, err := e.measuredCreate(label+", "+run.caps.Name, run.ns, run.caps, imgs, pairs, e.cfg.Deadline, profile)
		if p != nil {
			p.RatioToFloor = round(p.Seconds/fl.Seconds, 2)
			runs = append(runs, p)
		}
		if err != nil {
			return runs, err
		}
	}
	return runs, nil
}

// completeCache returns the namespace holding a cache that is complete on
// every node, for scenarios 2, 3 and 5: scenario 1's default-caps cache, else
// one made now without measuring. The non-binding run's cache is deleted, so
// that later scenarios see one cache of Images images.
func (e *env) completeCache(cold *coldResult) (string, error) {
	ctx, cancel := e.phaseContext()
	defer cancel()
	_ = e.k8s.DeleteAllOf(ctx, &v1alpha2.ImageCache{}, client.InNamespace("s1-open"))
	if cold != nil && len(cold.Runs) == 2 && cold.Runs[1].Status != nil && cold.Runs[1].Status.Status == string(v1alpha2.ImageCacheActionStatusSucceeded) {
		return "s1-default", nil
	}
	if !e.cfg.Runs(2) && !e.cfg.Runs(5) {
		// Scenario 3 alone makes its own caches on nodes that report the
		// images; it needs no Jobs to have run.
		return "bench-complete", e.namespace(ctx, "bench-complete")
	}
	e.t.Logf("making a complete cache for scenarios 2, 3 and 5 (not measured)")
	pairs := e.cfg.Nodes * e.cfg.Images
	_, final, err := e.measuredCreate("setup", "bench-complete", openCaps(pairs, e.cfg.Images), imageNames(e.cfg.Images), pairs, e.cfg.Deadline, false)
	if err != nil {
		return "", err
	}
	if final.Status.Status != v1alpha2.ImageCacheActionStatusSucceeded {
		return "", fmt.Errorf("the setup cache ended %s: %s", final.Status.Status, final.Status.Message)
	}
	return "bench-complete", nil
}

// watches are what scenarios 2 and 5 observe while nodes join.
type watches struct {
	nodes  *nodeWatch
	jobs   *jobWatch
	caches *cacheWatch
}

// joining names the one cache in ns, complete on every node, that
// scenarios 2 and 5 add nodes to, and starts their watches: the nodes
// (with the startup taint, or nil), and the Jobs and caches of ns.
func (e *env) joining(ctx context.Context, ns string, taint *plan.StartupTaint) (string, *watches, error) {
	caches := &v1alpha2.ImageCacheList{}
	if err := e.k8s.List(ctx, caches, client.InNamespace(ns)); err != nil {
		return "", nil, err
	}
	if len(caches.Items) != 1 {
		return "", nil, fmt.Errorf("want one complete cache in %s, found %d", ns, len(caches.Items))
	}
	w := &watches{}
	var err error
	if w.nodes, err = watchNodes(ctx, e.kube, taint); err != nil {
		return "", nil, err
	}
	if w.jobs, w.caches, err = e.watchNamespace(ctx, ns); err != nil {
		return "", nil, err
	}
	return caches.Items[0].Name, w, nil
}

// quiet is how long nothing must move before an incomplete scenario 2 is
// taken as finished.
const quiet = 30 * time.Second

func (e *env) newNodes(ns string) (*newNodesResult, error) {
	ctx, cancel := e.phaseContext()
	defer cancel()
	imgs := imageNames(e.cfg.Images)
	names := nodeNames("bench-new-", e.cfg.NewNodes)
	r := &newNodesResult{Run: e.runInfo(), ClusterNodes: e.cfg.Nodes, NewNodes: len(names), Images: len(imgs), Pairs: len(names) * len(imgs),
		PullDelaySeconds: e.cfg.PullDelay.Seconds()}
	cacheName, w, err := e.joining(ctx, ns, nil)
	if err != nil {
		return r, err
	}
	nw, jw, cw := w.nodes, w.jobs, w.caches
	ctl, wctx, err := e.runController(ctx, "s2-new-nodes", defaultCaps, "--image-pull-deadline-duration="+e.cfg.Deadline.String())
	if err != nil {
		return r, err
	}
	defer ctl.stop()
	// The controller's first look at the complete cache records which nodes
	// it covers; a node that joined before that would count as covered.
	time.Sleep(3 * time.Second)
	p := &phase{Name: "scenario 2, default caps", Caps: defaultCaps, Pairs: r.Pairs}
	m, err := e.startMeter(ctl)
	if err != nil {
		return r, err
	}
	specs := make([]sandbox.NodeSpec, len(names))
	set := map[string]bool{}
	for i, n := range names {
		specs[i] = sandbox.NodeSpec{Name: n}
		set[n] = true
	}
	e.t.Logf("scenario 2: %d nodes join a %d-node cluster", len(names), e.cfg.Nodes)
	began := time.Now()
	if err := e.sb.CreateNodes(ctx, specs...); err != nil {
		return r, err
	}
	// Done when every pull finished and the cache settled; or, if some new
	// nodes get no Job at all, once the cache has been settled and no Job
	// has moved for a while: that is a finding to report, not a reason to
	// wait for the phase's timeout.
	var done time.Time
	var final *v1alpha2.ImageCache
	for {
		at, c, settled := cw.settledNow(cacheName, v1alpha2.ImageCacheReasonImageCacheNewNodes)
		finished, last := jw.progress()
		if settled && (finished >= r.Pairs || (time.Since(at) > quiet && time.Since(last) > quiet)) {
			done, final = at, c
			break
		}
		select {
		case <-wctx.Done():
			if err := ctl.alive(); err != nil {
				return r, err
			}
			return r, fmt.Errorf("%d of %d new-node pulls finished, cache not settled: %w", finished, r.Pairs, wctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	if err := m.stop(p); err != nil {
		return r, err
	}
	var lastReady time.Time
	var firsts []float64
	for _, n := range names {
		ready, ok := nw.ready(n)
		if !ok {
			return r, fmt.Errorf("node %s never seen Ready", n)
		}
		if ready.After(lastReady) {
			lastReady = ready
		}
		nj := jw.node(n)
		if nj.done < len(imgs) {
			r.NodesNotPulled = append(r.NodesNotPulled, n)
		}
		if nj.added == 0 {
			continue
		}
		first := nj.firstAdd.Sub(ready).Seconds()
		firsts = append(firsts, first)
		r.FirstJobAfterReadyMax = max(r.FirstJobAfterReadyMax, first)
		r.AllStartedAfterReadyMax = max(r.AllStartedAfterReadyMax, nj.lastAdd.Sub(ready).Seconds())
		r.AllPulledAfterReadyMax = max(r.AllPulledAfterReadyMax, nj.lastDone.Sub(ready).Seconds())
	}
	if len(firsts) > 0 {
		sort.Float64s(firsts)
		r.FirstJobAfterReadyMedian = round(firsts[len(firsts)/2], 2)
	}
	r.FirstJobAfterReadyMax = round(r.FirstJobAfterReadyMax, 2)
	r.AllStartedAfterReadyMax = round(r.AllStartedAfterReadyMax, 2)
	r.AllPulledAfterReadyMax = round(r.AllPulledAfterReadyMax, 2)
	r.JobsOnOtherNodes = jw.createdOutside(set)
	r.Operations = cw.operations(cacheName, began)
	p.Seconds = round(done.Sub(lastReady).Seconds(), 2)
	timeline(p, jw, lastReady, done)
	r.SecondsFromCreate = round(done.Sub(began).Seconds(), 2)
	p.Jobs = jw.figures()
	p.Status = statusOf(final)
	e.statusWrites(p, cacheName, began, done)
	p.StatusOperations = r.Operations
	r.Phase = p
	e.t.Logf("scenario 2: %s in %.1fs after the last node was Ready; first Job per node at most %.1fs after Ready; %d Jobs on other nodes; %d of %d new nodes without every image",
		p.Status.Status, p.Seconds, r.FirstJobAfterReadyMax, r.JobsOnOtherNodes, len(r.NodesNotPulled), len(names))
	if err := ctl.stop(); err != nil {
		e.t.Logf("scenario 2: %v", err)
	}
	gone, err := e.waitGone(ns)
	p.CleanupSeconds = round(gone.Seconds(), 1)
	if err != nil {
		return r, err
	}
	fl, err := e.floor("scenario 2", "s2-floor", names, imgs)
	r.Floor = fl
	if err != nil {
		return r, err
	}
	p.RatioToFloor = round(p.Seconds/fl.Seconds, 2)
	return r, nil
}

func (e *env) steadyRefresh(ns string) (*refreshResult, error) {
	ctx, cancel := e.phaseContext()
	defer cancel()
	imgs := imageNames(e.cfg.Images)
	r := &refreshResult{Run: e.runInfo(), Images: len(imgs), RefreshEverySeconds: e.cfg.RefreshEvery.Seconds(), FinalStatuses: map[string]int{}}
	nodes, err := e.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return r, err
	}
	r.Nodes = len(nodes.Items)
	if err := e.reportImages(ctx, nodes.Items, imgs); err != nil {
		return r, err
	}
	jw, cw, err := e.watchNamespace(ctx, ns)
	if err != nil {
		return r, err
	}
	existing := &v1alpha2.ImageCacheList{}
	if err := e.k8s.List(ctx, existing, client.InNamespace(ns)); err != nil {
		return r, err
	}
	started := time.Now()
	ctl, wctx, err := e.runController(ctx, "s3-refresh", defaultCaps, "--image-cache-refresh-frequency="+e.cfg.RefreshEvery.String(),
		"--image-pull-deadline-duration="+e.cfg.Deadline.String())
	if err != nil {
		return r, err
	}
	defer ctl.stop()
	// Caches that exist are refreshed at start-up; the others are created on
	// nodes that already report every image. Either way no Job is due.
	var names []string
	for _, c := range existing.Items {
		if _, _, err := cw.final(wctx, c.Name, v1alpha2.ImageCacheReasonImageCacheRefresh, started); err != nil {
			return r, err
		}
		names = append(names, c.Name)
	}
	for i := len(names); i < e.cfg.RefreshCaches; i++ {
		c := newCache(ns, fmt.Sprintf("steady-%02d", i), imgs)
		if err := e.k8s.Create(ctx, c); err != nil {
			return r, err
		}
		if _, _, err := cw.final(wctx, c.Name, v1alpha2.ImageCacheReasonImageCacheCreate, started); err != nil {
			return r, err
		}
		names = append(names, c.Name)
	}
	r.Caches = len(names)
	e.t.Logf("scenario 3: %d complete caches, refresh every %s, watching %d refreshes of each", len(names), e.cfg.RefreshEvery, e.cfg.RefreshCycles)
	// Start times have a resolution of one second: an operation that ended
	// just now must not count as one started in the window.
	time.Sleep(1100 * time.Millisecond)
	m, err := e.startMeter(ctl)
	if err != nil {
		return r, err
	}
	windowStart := time.Now()
	for {
		enough := true
		for _, n := range names {
			if cw.finals(n, v1alpha2.ImageCacheReasonImageCacheRefresh, windowStart) < e.cfg.RefreshCycles {
				enough = false
			}
		}
		if enough && !cw.anyProcessing(names) {
			break
		}
		select {
		case <-wctx.Done():
			return r, fmt.Errorf("refreshes not seen: %w", wctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	p := &phase{}
	if err := m.stop(p); err != nil {
		return r, err
	}
	r.WindowSeconds = round(time.Since(windowStart).Seconds(), 1)
	r.Requests = p.Requests
	r.CPU = p.CPU
	r.ControllerCPUSeconds = p.ControllerCPUSeconds
	r.JobsCreated = jw.figures().Created
	r.AllPresent = true
	for _, n := range names {
		r.Refreshes += cw.operations(n, windowStart)
		for _, c := range cw.finalObjects(n, v1alpha2.ImageCacheReasonImageCacheRefresh, windowStart) {
			r.FinalStatuses[string(c.Status.Status)]++
			if c.Status.Counts == nil || c.Status.Counts.AlreadyPresent != c.Status.Counts.Desired || c.Status.Counts.Desired == 0 {
				r.AllPresent = false
			}
		}
	}
	if r.Refreshes > 0 {
		r.WritesPerRefresh = round(float64(p.Requests.Writes())/float64(r.Refreshes), 2)
		r.RequestsPerRefresh = round(float64(p.Requests.Total)/float64(r.Refreshes), 2)
	}
	e.t.Logf("scenario 3: %d refreshes, %d Jobs, %.1f writes per refresh", r.Refreshes, r.JobsCreated, r.WritesPerRefresh)
	return r, nil
}

// reportImages makes every node report every image, as kubelets would once
// the images are pulled.
func (e *env) reportImages(ctx context.Context, nodes []corev1.Node, imgs []string) error {
	list := make([]corev1.ContainerImage, len(imgs))
	for i, img := range imgs {
		list[i] = corev1.ContainerImage{Names: []string{img}, SizeBytes: 10 << 20}
	}
	names := make([]string, len(nodes))
	for i := range nodes {
		names[i] = nodes[i].Name
	}
	return e.setNodeImages(ctx, names, func(string) []corev1.ContainerImage { return list })
}

func (e *env) fastPods() (*fastResult, error) {
	images := e.cfg.FastPulls / e.cfg.FastNodes
	nodes, imgs := nodeNames("sandbox-node-", e.cfg.FastNodes), imageNames(images)
	r := &fastResult{Run: e.runInfo(), Nodes: len(nodes), Images: images, Pulls: e.cfg.FastPulls}
	fl, err := e.floor("scenario 4", "s4-floor", nodes, imgs)
	r.Floor = fl
	if err != nil {
		return r, err
	}
	r.Exact = true
	for i := range e.cfg.FastRuns {
		c := openCaps(r.Pulls, images)
		if i%2 == 1 {
			c = defaultCaps
		}
		ns := fmt.Sprintf("s4-run-%d", i+1)
		p, final, err := e.measuredCreate(fmt.Sprintf("scenario 4, run %d, %s", i+1, c.Name), ns, c, imgs, r.Pulls, e.cfg.FastDeadline, false)
		if p == nil {
			r.Exact = false
			return r, err
		}
		p.RatioToFloor = round(p.Seconds/fl.Seconds, 2)
		run := &fastRun{Phase: *p}
		run.Problems = exactness(p, final, r.Pulls)
		run.Exact = len(run.Problems) == 0
		r.Exact = r.Exact && run.Exact
		r.Runs = append(r.Runs, run)
		if err != nil {
			return r, err
		}
	}
	return r, nil
}

// exactness lists how a fast-pods run strayed from "every pull seen,
// succeeded, none failed or pending at the deadline".
func exactness(p *phase, final *v1alpha2.ImageCache, pulls int) []string {
	var out []string
	want := func(what string, got, exp float64) {
		if got != exp {
			out = append(out, fmt.Sprintf("%s: %v, want %v", what, got, exp))
		}
	}
	st := final.Status
	if st.Status != v1alpha2.ImageCacheActionStatusSucceeded {
		out = append(out, fmt.Sprintf("status %s: %s", st.Status, st.Message))
	}
	c := v1alpha2.Counts{}
	if st.Counts != nil {
		c = *st.Counts
	}
	want("counts.desired", float64(c.Desired), float64(pulls))
	want("counts.succeeded", float64(c.Succeeded), float64(pulls))
	want("counts.failed", float64(c.Failed), 0)
	want("counts.inFlight", float64(c.InFlight), 0)
	want("counts.waiting", float64(c.Waiting), 0)
	want("failed images", float64(len(st.Failures)), 0)
	want("pulls in the Jobs created (watch)", float64(p.Jobs.Pairs), float64(pulls))
	want("pulls in the Jobs finished (watch)", float64(p.Jobs.PairsDone), float64(pulls))
	want(`image_pulls_total{result="succeeded"}`, p.Metrics[`kubefledged_image_pulls_total{result="succeeded"}`], float64(pulls))
	want(`jobs_finished_total{result="expired"}`, p.Metrics[`kubefledged_jobs_finished_total{kind="pull",result="expired"}`], 0)
	want(`jobs_finished_total{result="failed"}`, p.Metrics[`kubefledged_jobs_finished_total{kind="pull",result="failed"}`], 0)
	return out
}
