package bench

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

func (e *env) heldNodes(ns string) (*heldResult, error) {
	ctx, cancel := e.phaseContext()
	defer cancel()
	imgs := imageNames(e.cfg.Images)
	names := nodeNames("bench-held-", e.cfg.HeldNodes)
	r := &heldResult{Run: e.runInfo(), ClusterNodes: e.cfg.Nodes, HeldNodes: len(names), Images: len(imgs), Pairs: len(names) * len(imgs),
		PullDelaySeconds: e.cfg.PullDelay.Seconds(), ReleasedBy: map[string]int{}}
	cacheName, w, err := e.joining(ctx, ns, benchStartupTaint)
	if err != nil {
		return r, err
	}
	hw, jw, cw := w.nodes, w.jobs, w.caches
	ctl, wctx, err := e.runController(ctx, "s5-held-nodes", defaultCaps, "--image-pull-deadline-duration="+e.cfg.Deadline.String(),
		"--node-startup-taint="+benchStartupTaint.String())
	if err != nil {
		return r, err
	}
	defer ctl.stop()
	p := &phase{Name: "scenario 5, default caps", Caps: defaultCaps, Pairs: r.Pairs}
	m, err := e.startMeter(ctl)
	if err != nil {
		return r, err
	}
	specs := make([]sandbox.NodeSpec, len(names))
	for i, n := range names {
		specs[i] = sandbox.NodeSpec{Name: n, Taints: []corev1.Taint{{Key: benchStartupTaint.Key, Effect: benchStartupTaint.Effect}}}
	}
	e.t.Logf("scenario 5: %d nodes join a %d-node cluster with the startup taint %s", len(names), e.cfg.Nodes, benchStartupTaint)
	began := time.Now()
	if err := e.sb.CreateNodes(ctx, specs...); err != nil {
		return r, err
	}
	for hw.released(names) < len(names) {
		select {
		case <-wctx.Done():
			if err := ctl.alive(); err != nil {
				return r, err
			}
			r.NodesNotReleased = hw.held(names)
			return r, fmt.Errorf("%d of %d held nodes released: %w", len(names)-len(r.NodesNotReleased), len(names), wctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	// The nodes are released as their last pulls settle, a moment before
	// the operation that pulled them writes its final status.
	var done time.Time
	var final *v1alpha2.ImageCache
	for {
		at, c, settled := cw.settledNow(cacheName, v1alpha2.ImageCacheReasonImageCacheNewNodes)
		if settled {
			done, final = at, c
			break
		}
		select {
		case <-wctx.Done():
			return r, fmt.Errorf("every held node released, the cache not settled: %w", wctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	if err := m.stop(p); err != nil {
		return r, err
	}
	after, err := ctl.scrape()
	if err != nil {
		return r, err
	}
	var count, sum float64
	for k, v := range metricDelta(m.metrics, after, "kubefledged_node_startup_taint_hold_seconds_") {
		switch {
		case strings.HasPrefix(k, "kubefledged_node_startup_taint_hold_seconds_count{"):
			reason := strings.TrimSuffix(strings.TrimPrefix(k, `kubefledged_node_startup_taint_hold_seconds_count{reason="`), `"}`)
			r.ReleasedBy[reason] = int(v)
			count += v
		case strings.HasPrefix(k, "kubefledged_node_startup_taint_hold_seconds_sum{"):
			sum += v
		}
	}
	if count > 0 {
		r.HistogramMeanSeconds = round(sum/count, 2)
	}
	var holds, fromReady, afterPulled []float64
	var last time.Time
	for _, n := range names {
		h := hw.node(n)
		if h.released.After(last) {
			last = h.released
		}
		holds = append(holds, h.released.Sub(h.created).Seconds())
		if !h.ready.IsZero() {
			fromReady = append(fromReady, h.released.Sub(h.ready).Seconds())
		}
		if nj := jw.node(n); nj.done > 0 {
			afterPulled = append(afterPulled, h.released.Sub(nj.lastDone).Seconds())
		}
	}
	r.HoldMedian, r.HoldP90, r.HoldMax = quantile(holds, 0.5), quantile(holds, 0.9), quantile(holds, 1)
	r.HoldAfterReadyMedian, r.HoldAfterReadyMax = quantile(fromReady, 0.5), quantile(fromReady, 1)
	r.ReleaseAfterPulledMedian, r.ReleaseAfterPulledMax = quantile(afterPulled, 0.5), quantile(afterPulled, 1)
	r.AllReleasedSeconds = round(last.Sub(began).Seconds(), 2)
	p.Seconds = round(done.Sub(began).Seconds(), 2)
	timeline(p, jw, began, done)
	p.Jobs = jw.figures()
	p.Status = statusOf(final)
	e.statusWrites(p, cacheName, began, done)
	r.Phase = p
	e.t.Logf("scenario 5: %d nodes released in %.1fs; hold per node median %.1fs, p90 %.1fs, max %.1fs (from Ready: median %.1fs, max %.1fs; after the node's last pull: max %.2fs); by reason %v",
		len(names), r.AllReleasedSeconds, r.HoldMedian, r.HoldP90, r.HoldMax, r.HoldAfterReadyMedian, r.HoldAfterReadyMax, r.ReleaseAfterPulledMax, r.ReleasedBy)
	if err := ctl.stop(); err != nil {
		e.t.Logf("scenario 5: %v", err)
	}
	gone, err := e.waitGone(ns)
	p.CleanupSeconds = round(gone.Seconds(), 1)
	return r, err
}

// quantile is the q-quantile of v (nearest rank), rounded to 10 ms.
func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	i := int(q*float64(len(s))+0.5) - 1
	return round(s[min(max(i, 0), len(s)-1)], 2)
}
