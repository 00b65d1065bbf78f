package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// otherImageBytes is the size of the smallest image of other workloads on a
// scenario-6 node: above every cached image (sandbox.KubeletImage sizes them
// below 1 GB), so that each one pushes a cached image out of the status.
const otherImageBytes = 1_100_000_000

// warmImages is what node i of scenario 6 holds: every cached image, as
// containerd lists it, and i mod (other+1) larger images of other workloads.
func warmImages(cached []string, i, other int) ([]corev1.ContainerImage, error) {
	var held []corev1.ContainerImage
	for _, ref := range cached {
		img, ok := sandbox.KubeletImage(ref)
		if !ok {
			return nil, fmt.Errorf("image %q does not parse", ref)
		}
		held = append(held, img)
	}
	for j := range i % (other + 1) {
		img, ok := sandbox.KubeletImage(fmt.Sprintf("registry.bench.test/other-%02d:v1", j))
		if !ok {
			return nil, fmt.Errorf("other image %d does not parse", j)
		}
		img.SizeBytes = otherImageBytes + int64(j)*100_000_000
		held = append(held, img)
	}
	return held, nil
}

// unlisted counts the cached images a status list leaves out. The kubelet
// lists each image under its tag, which is how the cache names them.
func unlisted(cached []string, listed []corev1.ContainerImage) int {
	names := map[string]bool{}
	for _, img := range listed {
		for _, n := range img.Names {
			names[n] = true
		}
	}
	n := 0
	for _, ref := range cached {
		if !names[ref] {
			n++
		}
	}
	return n
}

// warmRefresh is scenario 6: nodes that hold every cached image, some of
// them past the kubelet's 50 listed, and one refresh of the complete cache
// measured from the request to its final status.
func (e *env) warmRefresh() (*warmResult, error) {
	return e.warmRefreshOf("scenario 6", "s6-warm", nodeNames("sandbox-node-", e.cfg.WarmNodes), e.cfg.WarmOther)
}

// warmRefreshOf measures a refresh of a complete cache of BENCH_WARM_IMAGES images on
// nodes, each also holding up to other larger images (none: every cached image is in
// node status, scenario 9).
func (e *env) warmRefreshOf(label, ns string, nodes []string, other int) (*warmResult, error) {
	ctx, cancel := e.phaseContext()
	defer cancel()
	imgs := imageNames(e.cfg.WarmImages)
	r := &warmResult{Run: e.runInfo(), Nodes: len(nodes), Images: len(imgs), Pairs: len(nodes) * len(imgs),
		OtherImagesMax: other, NodesByUnreported: map[string]int{}}
	lists := make(map[string][]corev1.ContainerImage, len(nodes))
	unreported := make(map[string]int, len(nodes))
	for i, n := range nodes {
		held, err := warmImages(imgs, i, other)
		if err != nil {
			return r, err
		}
		lists[n] = sandbox.NodeStatusImages(held)
		unreported[n] = unlisted(imgs, lists[n])
		r.UnreportedPairs += unreported[n]
		r.NodesByUnreported[strconv.Itoa(unreported[n])]++
	}
	r.ReportedPairs = r.Pairs - r.UnreportedPairs
	if err := e.setNodeImages(ctx, nodes, func(n string) []corev1.ContainerImage { return lists[n] }); err != nil {
		return r, err
	}
	if err := e.namespace(ctx, ns); err != nil {
		return r, err
	}
	cw, err := watchCaches(ctx, e.k8s, ns)
	if err != nil {
		return r, err
	}
	// No periodic refresh: the one measured is the one asked for.
	ctl, wctx, err := e.runController(ctx, ns, defaultCaps, "--image-cache-refresh-frequency=0s",
		"--image-pull-deadline-duration="+e.cfg.Deadline.String())
	if err != nil {
		return r, err
	}
	defer ctl.stop()

	e.t.Logf("%s: %d nodes × %d images, %d pairs not in node status; completing the cache (not measured)", label, len(nodes), len(imgs), r.UnreportedPairs)
	began := time.Now()
	cache := newCache(ns, "warm", imgs)
	if err := e.k8s.Create(ctx, cache); err != nil {
		return r, err
	}
	_, created, err := cw.final(wctx, cache.Name, v1alpha2.ImageCacheReasonImageCacheCreate, began)
	if err != nil {
		return r, err
	}
	if created.Status.Status != v1alpha2.ImageCacheActionStatusSucceeded {
		return r, fmt.Errorf("the cache was created %s: %s", created.Status.Status, created.Status.Message)
	}
	if _, err := e.waitGone(ns); err != nil {
		return r, err
	}
	e.t.Logf("%s: cache complete in %s; refreshing it", label, time.Since(began).Round(time.Second))

	jw, err := watchJobs(ctx, e.kube, ns)
	if err != nil {
		return r, err
	}
	p := &phase{Name: label + ", default caps", Caps: defaultCaps, Pairs: r.Pairs}
	m, err := e.startMeter(ctl)
	if err != nil {
		return r, err
	}
	began = time.Now()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{v1alpha2.RefreshAnnotation: ""}}})
	if err != nil {
		return r, err
	}
	if err := e.k8s.Patch(ctx, cache, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return r, err
	}
	done, final, err := cw.final(wctx, cache.Name, v1alpha2.ImageCacheReasonImageCacheRefresh, began)
	if err != nil {
		if aerr := ctl.alive(); aerr != nil {
			err = aerr
		}
		return r, err
	}
	if err := m.stop(p); err != nil {
		return r, err
	}
	p.Seconds = round(done.Sub(began).Seconds(), 2)
	timeline(p, jw, began, done)
	p.Jobs = jw.figures()
	p.Status = statusOf(final)
	e.statusWrites(p, cache.Name, began, done)
	r.Phase = p
	r.RecheckedPairs = p.Jobs.Pairs
	for _, n := range nodes {
		got := jw.node(n).added
		r.RecheckedMaxPerNode = max(r.RecheckedMaxPerNode, got)
		if got != unreported[n] {
			r.NodesMismatched = append(r.NodesMismatched, n)
		}
	}
	r.WritesPerPair = round(float64(p.Requests.Writes())/float64(r.Pairs), 3)
	r.RequestsPerPair = round(float64(p.Requests.Total)/float64(r.Pairs), 3)
	e.t.Logf("%s: %s in %.1fs; %d pulls re-checked (%d not in node status), %d nodes differ; %d Jobs; %.3f API writes per (image, node); controller %.1f CPU s, peak RSS %.0f MiB",
		label, p.Status.Status, p.Seconds, r.RecheckedPairs, r.UnreportedPairs, len(r.NodesMismatched), p.Jobs.Created, r.WritesPerPair, p.ControllerCPUSeconds, p.ControllerPeakRSSMiB)
	if err := ctl.stop(); err != nil {
		e.t.Logf("%s: %v", label, err)
	}
	gone, err := e.waitGone(ns)
	p.CleanupSeconds = round(gone.Seconds(), 1)
	return r, err
}

// setNodeImages sets the status.images of the named nodes, as their
// kubelets would report them, a few nodes at a time.
func (e *env) setNodeImages(ctx context.Context, nodes []string, list func(node string) []corev1.ContainerImage) error {
	sem := make(chan struct{}, 16)
	errs := make(chan error, len(nodes))
	for _, n := range nodes {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			errs <- e.sb.SetNodeImages(ctx, n, list(n))
		}()
	}
	var first error
	for range nodes {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Scenario 6's nodes leave out of their status as many cached images as
// they hold other ones, the smallest cached ones: what the figures of the
// scenario are held against.
func TestWarmImagesLeaveOut(t *testing.T) {
	g := NewWithT(t)
	cached := imageNames(50)
	for i := range 7 {
		held, err := warmImages(cached, i, 5)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(held).To(HaveLen(50 + i%6))
		listed := sandbox.NodeStatusImages(held)
		g.Expect(listed).To(HaveLen(50))
		g.Expect(unlisted(cached, listed)).To(Equal(i%6), "node %d", i)
		for _, img := range listed[:i%6] {
			g.Expect(img.Names[1]).To(HavePrefix("registry.bench.test/other-"))
		}
	}
	g.Expect(unlisted(cached[:3], nil)).To(Equal(3))
}
