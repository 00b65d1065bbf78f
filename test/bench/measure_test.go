package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
)

func statusOf(c *v1alpha2.ImageCache) *statusFigures {
	s := &statusFigures{Status: string(c.Status.Status), Reason: c.Status.Reason, Progress: c.Status.Progress,
		FailedImages: len(c.Status.Failures), FailuresOmitted: c.Status.FailuresOmitted}
	if c.Status.Counts != nil {
		s.Counts = *c.Status.Counts
	}
	return s
}

// meter holds the counters at the start of a measured stretch.
type meter struct {
	e       *env
	ctl     *controller
	proxy   proxySnapshot
	metrics map[string]float64
	cpu     cpuSample
	mem     memory
}

func (e *env) startMeter(ctl *controller) (*meter, error) {
	m, err := ctl.scrape()
	if err != nil {
		return nil, err
	}
	return &meter{e: e, ctl: ctl, proxy: e.proxy.snapshot(), metrics: m, cpu: sampleCPU(e.sb.Dir(), ctl.pid), mem: memKiB(ctl.pid)}, nil
}

func (m *meter) stop(p *phase) error {
	cpu := sampleCPU(m.e.sb.Dir(), m.ctl.pid)
	px := m.e.proxy.snapshot()
	after, err := m.ctl.scrape()
	if err != nil {
		return err
	}
	p.Requests = deltaOf(m.proxy, px)
	p.ClientGo = metricDelta(m.metrics, after, "rest_client_requests_total")
	p.Metrics = metricDelta(m.metrics, after, "kubefledged_jobs_", "kubefledged_image_pulls_total")
	p.CPU = cpuBetween(m.cpu, cpu)
	p.ControllerCPUSeconds = p.CPU.ByProcess["controller"]
	mem := memKiB(m.ctl.pid)
	p.ControllerPeakRSSMiB = mib(mem.HWM)
	p.ControllerStartRSSMiB = mib(m.mem.RSS)
	p.ControllerEndAnonMiB, p.ControllerEndFileMiB = mib(mem.Anon), mib(mem.File)
	p.ControllerEndHeapInuseMiB = round(after["go_memstats_heap_inuse_bytes"]/(1<<20), 1)
	if p.Pairs > 0 {
		p.JobWritesPerPair = round(float64(p.Requests.Count("jobs", "create", "update", "patch", "delete", "deletecollection"))/float64(p.Pairs), 3)
	}
	return nil
}

// statusWrites fills the status-write figures of one cache over [from, to].
func (e *env) statusWrites(p *phase, cache string, from, to time.Time) {
	ts := e.proxy.cacheWriteTimes(from, to)[cache]
	p.StatusWrites = len(ts)
	if d := to.Sub(from).Seconds(); d > 0 {
		p.StatusWritesPerSecond = round(float64(len(ts))/d, 2)
		if d := round(d, 2); d != p.Seconds {
			p.StatusWritesSeconds = d
		}
	}
	perSecond := map[int64]int{}
	for _, t := range ts {
		perSecond[t.Unix()]++
		p.StatusWritesPeakPerSecond = max(p.StatusWritesPeakPerSecond, perSecond[t.Unix()])
	}
}

// until is ctx, ended early once the controller exits: a crashed controller must fail
// the phase at once, not at its timeout.
func (p *controller) until(ctx context.Context) context.Context {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		defer cancel()
		select {
		case <-p.exited:
		case <-ctx.Done():
		}
	}()
	return ctx
}

// measuredCreate runs one controller on a fresh namespace, creates one
// cache of imgs on every node and measures the operation to its end.
func (e *env) measuredCreate(label, ns string, c caps, imgs []string, pairs int, deadline time.Duration, profile bool) (*phase, *v1alpha2.ImageCache, error) {
	ctx, cancel := e.phaseContext()
	defer cancel()
	ctl, wctx, err := e.runController(ctx, ns, c, "--image-pull-deadline-duration="+deadline.String())
	if err != nil {
		return nil, nil, err
	}
	defer ctl.stop()
	var pr *profiler
	if profile {
		pr = ctl.profile(e.outDir, ns)
	}
	e.t.Logf("%s: %d pulls, %s", label, pairs, c.Name)
	mc, err := e.createMeasured(ctx, ctl, &phase{Name: label, Caps: c, Pairs: pairs}, newCache(ns, "bench", imgs))
	if err != nil {
		return nil, nil, err
	}
	final, err := mc.settle(wctx)
	if err != nil {
		return nil, nil, err
	}
	p := mc.p
	if pr != nil {
		out := filepath.Join(e.outDir, "cpu-"+ns+".pb.gz")
		if err := pr.stop(ctx, out); err != nil {
			e.t.Logf("%s: profile: %v", label, err)
		} else {
			p.Profile = out
		}
		if pr.heap != "" {
			e.t.Logf("%s: heap profile at RSS %d MiB: %s", label, pr.peakRSS>>10, pr.heap)
		}
	}
	if err := ctl.stop(); err != nil {
		e.t.Logf("%s: %v", label, err)
	}
	gone, err := e.waitGone(ns)
	p.CleanupSeconds = round(gone.Seconds(), 1)
	if err != nil {
		return p, final, fmt.Errorf("%s: %w", label, err)
	}
	return p, final, nil
}

// measured is one cache's create being measured: the watches of its namespace, the
// meter started just before the create, and the phase settle fills in. Scenario 10 has
// two of them at once on one controller.
type measured struct {
	e     *env
	ctl   *controller
	p     *phase
	m     *meter
	jw    *jobWatch
	cw    *cacheWatch
	cache *v1alpha2.ImageCache
	began time.Time
	done  time.Time
}

// createMeasured starts the watches of the cache's namespace and the meter, and creates
// the cache.
func (e *env) createMeasured(ctx context.Context, ctl *controller, p *phase, cache *v1alpha2.ImageCache) (*measured, error) {
	if err := e.namespace(ctx, cache.Namespace); err != nil {
		return nil, err
	}
	jw, cw, err := e.watchNamespace(ctx, cache.Namespace)
	if err != nil {
		return nil, err
	}
	m, err := e.startMeter(ctl)
	if err != nil {
		return nil, err
	}
	mc := &measured{e: e, ctl: ctl, p: p, m: m, jw: jw, cw: cw, cache: cache, began: time.Now()}
	return mc, e.k8s.Create(ctx, cache)
}

// settle waits for the cache's create to end and fills the phase from the meter and the
// watches.
func (mc *measured) settle(wctx context.Context) (*v1alpha2.ImageCache, error) {
	e, p := mc.e, mc.p
	done, final, err := mc.cw.final(wctx, mc.cache.Name, v1alpha2.ImageCacheReasonImageCacheCreate, mc.began)
	if err != nil {
		if aerr := mc.ctl.alive(); aerr != nil {
			err = aerr
		}
		return nil, err
	}
	mc.done = done
	if err := mc.m.stop(p); err != nil {
		return nil, err
	}
	p.Seconds = round(done.Sub(mc.began).Seconds(), 2)
	// The controller settles a node Job from its pod and may write the final
	// status before the watch hears of that Job's deletion: the watch's
	// counts are read once it has caught up, or, if a Job is left behind
	// (which exactness then reports), a little later.
	t0 := time.Now()
	if open := mc.jw.caughtUp(wctx, 30*time.Second); open > 0 {
		e.t.Logf("%s: %d Jobs neither finished nor deleted %s after the final status", p.Name, open, time.Since(done).Round(time.Second))
	} else if waited := time.Since(t0); waited > time.Second {
		e.t.Logf("%s: the Job watch caught up %s after the final status", p.Name, waited.Round(100*time.Millisecond))
	}
	timeline(p, mc.jw, mc.began, done)
	p.Jobs = mc.jw.figures()
	p.Status = statusOf(final)
	e.statusWrites(p, mc.cache.Name, mc.began, done)
	e.t.Logf("%s: %s in %.1fs, peak %d Jobs in flight, controller %.1f CPU s, peak RSS %.0f MiB",
		p.Name, p.Status.Status, p.Seconds, p.Jobs.PeakInFlight, p.ControllerCPUSeconds, p.ControllerPeakRSSMiB)
	return final, nil
}

func mib(kib int64) float64 { return round(float64(kib)/1024, 1) }

func timeline(p *phase, jw *jobWatch, began, done time.Time) {
	first, last, lastDone := jw.times()
	if first.IsZero() {
		return
	}
	p.FirstJobSeconds = round(first.Sub(began).Seconds(), 2)
	p.LastJobSeconds = round(last.Sub(began).Seconds(), 2)
	if lastDone.IsZero() {
		p.LastDoneSeconds, p.TailSeconds = -1, -1
		return
	}
	p.LastDoneSeconds = round(lastDone.Sub(began).Seconds(), 2)
	p.TailSeconds = round(done.Sub(lastDone).Seconds(), 2)
}
