package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/hack/benchreport/report"
)

// smallLabel marks the nodes of scenario 10's small caches: "alone" and "beside" name
// two sets of SmallNodes nodes each, so that the second small cache pulls as much as the
// first did.
const smallLabel = "bench.kubefledged.io/small"

// smallBeside is scenario 10: one controller with the default caps; a small cache
// alone, then a cache of scenario 1's scale and, once it runs, the same small cache on
// other nodes. Each cache has images of its own, which no scenario before pulled.
func (e *env) smallBeside() (*fairnessResult, error) {
	ctx, cancel := e.phaseContext()
	defer cancel()
	r := &fairnessResult{Run: e.runInfo(), SmallNodes: report.SmallNodes, SmallImages: report.SmallImages, LargeNodes: e.cfg.Nodes, LargeImages: e.cfg.Images}
	if e.cfg.Nodes < 2*report.SmallNodes {
		return r, fmt.Errorf("scenario 10 needs %d nodes, BENCH_NODES is %d", 2*report.SmallNodes, e.cfg.Nodes)
	}
	nodes := nodeNames("sandbox-node-", 2*report.SmallNodes)
	if err := e.labelNodes(ctx, "alone", nodes[:report.SmallNodes]); err != nil {
		return r, err
	}
	if err := e.labelNodes(ctx, "beside", nodes[report.SmallNodes:]); err != nil {
		return r, err
	}
	ctl, wctx, err := e.runController(ctx, "s10-small", defaultCaps, "--image-pull-deadline-duration="+e.cfg.Deadline.String())
	if err != nil {
		return r, err
	}
	defer ctl.stop()
	small, smallPairs := imageSet("small", report.SmallImages), report.SmallNodes*report.SmallImages
	alone, err := e.createMeasured(ctx, ctl, &phase{Name: "scenario 10, small cache alone", Caps: defaultCaps, Pairs: smallPairs}, smallCache("s10-alone", "alone", small))
	if err != nil {
		return r, err
	}
	if _, err := alone.settle(wctx); err != nil {
		return r, err
	}
	r.Alone = alone.p
	large, err := e.createMeasured(ctx, ctl, &phase{Name: "scenario 10, large cache", Caps: defaultCaps, Pairs: e.cfg.Nodes * e.cfg.Images},
		newCache("s10-large", "large", imageSet("large", e.cfg.Images)))
	if err != nil {
		return r, err
	}
	// The large cache runs once its first Job is out: its whole plan waits on the caps.
	err = wait.PollUntilContextCancel(wctx, 100*time.Millisecond, true, func(context.Context) (bool, error) { return large.jw.figures().Created > 0, nil })
	if err != nil {
		return r, fmt.Errorf("the large cache's first Job: %w", err)
	}
	r.LargeJobsAtSmallCreate = large.jw.inFlight()
	beside, err := e.createMeasured(ctx, ctl, &phase{Name: "scenario 10, small cache beside the large one", Caps: defaultCaps, Pairs: smallPairs},
		smallCache("s10-beside", "beside", small))
	if err != nil {
		return r, err
	}
	if _, err := beside.settle(wctx); err != nil {
		return r, err
	}
	r.Beside = beside.p
	r.Ratio = round(beside.p.Seconds/alone.p.Seconds, 2)
	largeDone, _ := large.cw.finalSince(large.cache.Name, v1alpha2.ImageCacheReasonImageCacheCreate, large.began)
	r.LargeRunning = largeDone.IsZero() || largeDone.After(beside.done)
	if _, err := large.settle(wctx); err != nil {
		return r, err
	}
	r.Large = large.p
	e.t.Logf("scenario 10: the small cache took %.1fs beside the large one (%d of its Jobs in flight at the create), %.1fs alone: %.2fx",
		beside.p.Seconds, r.LargeJobsAtSmallCreate, alone.p.Seconds, r.Ratio)
	if err := ctl.stop(); err != nil {
		e.t.Logf("scenario 10: %v", err)
	}
	for _, mc := range []*measured{alone, beside, large} {
		gone, err := e.waitGone(mc.cache.Namespace)
		mc.p.CleanupSeconds = round(gone.Seconds(), 1)
		if err != nil {
			return r, err
		}
	}
	return r, nil
}

// smallCache is scenario 10's small cache of imgs on the nodes labelled set.
func smallCache(ns, set string, imgs []string) *v1alpha2.ImageCache {
	c := newCache(ns, "small-"+set, imgs)
	c.Spec.CacheSpec[0].NodeSelector = map[string]string{smallLabel: set}
	return c
}

// labelNodes puts smallLabel=set on the nodes.
func (e *env) labelNodes(ctx context.Context, set string, nodes []string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{smallLabel: set}}})
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if _, err := e.kube.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return err
		}
	}
	return nil
}
