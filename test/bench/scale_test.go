package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/hack/benchreport/report"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// grown is the cluster scenarios 8 and 9 run on: the nodes the sandbox held, and, when
// that is fewer than wanted, what stopped it.
type grown struct {
	nodes   []string
	wanted  int
	shortBy string
	seconds float64
}

// scaleScenarios runs scenarios 8 and 9 in a sandbox of their own, started empty and
// grown to ScaleNodes: a machine that cannot hold that many kwok nodes still measures
// the largest cluster it holds, and says what ran out.
func scaleScenarios(t *testing.T, cfg config, binary, outDir string, rep *benchRun) error {
	opts := sandbox.Options{PullDelay: cfg.PullDelay, Profile: benchProfile()}
	return withEnv(t, cfg, binary, outDir, opts, func(e *env) error {
		g := e.growNodes(cfg.ScaleNodes)
		if len(g.nodes) == 0 {
			return fmt.Errorf("scenarios 8 and 9: the sandbox held no node: %s", g.shortBy)
		}
		if cfg.Runs(8) {
			r, err := e.scaleCold(g)
			rep.Scenarios.ScaleCold = r
			if err != nil {
				return fmt.Errorf("scenario 8: %w", err)
			}
		}
		if cfg.Runs(9) {
			r, err := e.warmRefreshOf("scenario 9", "s9-warm", g.nodes, 0)
			rep.Scenarios.ScaleWarm = r
			if err != nil {
				return fmt.Errorf("scenario 9: %w", err)
			}
		}
		return nil
	})
}

// growNodes adds nodes ScaleBatch at a time until want, or until a batch fails: that
// batch's nodes are deleted again, so that the cluster holds exactly the nodes returned.
func (e *env) growNodes(want int) grown {
	g := grown{wanted: want}
	names := nodeNames("sandbox-node-", want)
	began := time.Now()
	for len(g.nodes) < want {
		batch := names[len(g.nodes):min(want, len(g.nodes)+report.ScaleBatch)]
		specs := make([]sandbox.NodeSpec, len(batch))
		for i, n := range batch {
			specs[i] = sandbox.NodeSpec{Name: n}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		err := e.sb.CreateNodes(ctx, specs...)
		cancel()
		if err != nil {
			g.shortBy = fmt.Sprintf("nodes %d to %d did not settle: %s (MemAvailable %.1f GiB, load average %s)",
				len(g.nodes), len(g.nodes)+len(batch)-1, firstLine(err), memInfoGiB("MemAvailable"), loadAvg())
			e.t.Logf("scenarios 8 and 9: %s; going on with %d nodes", g.shortBy, len(g.nodes))
			e.dropNodes(batch)
			break
		}
		g.nodes = append(g.nodes, batch...)
		e.t.Logf("scenarios 8 and 9: %d of %d nodes Ready after %s", len(g.nodes), want, time.Since(began).Round(time.Second))
	}
	g.seconds = round(time.Since(began).Seconds(), 1)
	return g
}

// dropNodes deletes the nodes of a batch that did not settle; one that cannot be deleted
// is reported, and scenario 8's exactness then shows what it changed.
func (e *env) dropNodes(names []string) {
	ctx, cancel := e.phaseContext()
	defer cancel()
	for _, n := range names {
		if err := e.sb.DeleteNode(ctx, n); err != nil && !apierrors.IsNotFound(err) {
			e.t.Logf("deleting node %s: %v", n, err)
		}
	}
}

// firstLine is an error's first line, at most 300 characters: a batch's failure joins
// one error per node.
func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// scaleCold is scenario 8: a cold cache of BENCH_IMAGES images on every node with the
// default caps, against one bare Job per node in the same sandbox.
func (e *env) scaleCold(g grown) (*scaleResult, error) {
	imgs := imageNames(e.cfg.Images)
	r := &scaleResult{Run: e.runInfo(), NodesWanted: g.wanted, Nodes: len(g.nodes), ShortBy: g.shortBy, NodesCreateSeconds: g.seconds,
		Images: len(imgs), Pairs: len(g.nodes) * len(imgs)}
	fl, err := e.nodeFloor("scenario 8", "s8-floor", g.nodes, imgs)
	r.Floor = fl
	if err != nil {
		return r, err
	}
	p, final, err := e.measuredCreate("scenario 8, default caps", "s8", defaultCaps, imgs, r.Pairs, e.cfg.Deadline, false)
	r.Phase = p
	if p == nil {
		return r, err
	}
	p.RatioToFloor = round(p.Seconds/fl.Seconds, 2)
	r.Problems = exactness(p, final, r.Pairs)
	r.Exact = len(r.Problems) == 0
	r.WritesPerPair = round(float64(p.Requests.Writes())/float64(r.Pairs), 3)
	perNode(r, p)
	e.t.Logf("scenario 8: %d nodes, exact %v, %.2fx the node floor, %.3f API writes per pair, peak RSS %.0f MiB (%.1f KiB per node)",
		r.Nodes, r.Exact, p.RatioToFloor, r.WritesPerPair, p.ControllerPeakRSSMiB, r.RSSPerNodeKiB)
	if err != nil {
		return r, err
	}
	// Scenario 9's controller would refresh this cache at its start, inside
	// what it measures.
	ctx, cancel := e.phaseContext()
	defer cancel()
	return r, e.k8s.DeleteAllOf(ctx, &v1alpha2.ImageCache{}, client.InNamespace("s8"))
}

// perNode fills the controller's figures per node, which read a run short of its scale
// at the scale wanted.
func perNode(r *scaleResult, p *phase) {
	if r.Nodes == 0 {
		return
	}
	n := float64(r.Nodes)
	r.RSSPerNodeKiB = round((p.ControllerPeakRSSMiB-p.ControllerStartRSSMiB)*1024/n, 1)
	r.CPUPerNodeMillis = round(p.ControllerCPUSeconds*1000/n, 2)
	r.RequestsPerNode = round(float64(p.Requests.Total)/n, 2)
}

// A batch's failure is reported by its first line, short enough for the page.
func TestFirstLine(t *testing.T) {
	g := NewWithT(t)
	long := strings.Repeat("x", 400)
	for _, c := range []struct {
		err  error
		want string
	}{
		{errors.New("a\nb"), "a"},
		{errors.New(long), long[:300] + "..."},
		{errors.Join(errors.New("create node n1: no memory"), errors.New("create node n2: no memory")), "create node n1: no memory"},
	} {
		g.Expect(firstLine(c.err)).To(Equal(c.want), "%q", c.err)
	}
}

// A run short of its scale reads at it by the controller's figures per node: its RSS
// above the start, its CPU, its requests.
func TestPerNode(t *testing.T) {
	g := NewWithT(t)
	r := &scaleResult{Nodes: 3000}
	perNode(r, &phase{ControllerStartRSSMiB: 60, ControllerPeakRSSMiB: 120, ControllerCPUSeconds: 30, Requests: requestDelta{Total: 6000}})
	g.Expect(r.RSSPerNodeKiB).To(Equal(20.5))
	g.Expect(r.CPUPerNodeMillis).To(Equal(10.0))
	g.Expect(r.RequestsPerNode).To(Equal(2.0))
	empty := &scaleResult{}
	perNode(empty, &phase{ControllerPeakRSSMiB: 100})
	g.Expect(*empty).To(Equal(scaleResult{}))
}
