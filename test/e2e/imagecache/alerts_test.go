package imagecache_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/commands"
	"github.com/kubefledged/kube-fledged/internal/pacing"
	"github.com/kubefledged/kube-fledged/internal/plan"
	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

var updateScrapes = flag.Bool("update-scrapes", false,
	"write the scrapes of TestAlertsOnScrapedSeries to test/monitoring/testdata, where the alert tests read them")

// Where the alert tests live, and the chart values whose rendering they
// evaluate: the controller here runs with those values' durations.
var (
	monitoringModule = filepath.Join("..", "..", "monitoring")
	sandboxValues    = filepath.Join("..", "..", "golden", "testdata", "monitoring-sandbox.values.yaml")
	committedScrapes = filepath.Join(monitoringModule, "testdata", "sandbox-run.txt")
)

// TestAlertsOnScrapedSeries runs the controller through what each of the
// chart's alerts is about, scraping its /metrics every second as Prometheus
// would, then has Prometheus's rule engine (test/monitoring) evaluate the
// chart's PrometheusRule on those scrapes: each alert must fire when its
// cause is there and not before.
//
// The run: a Lease held by someone else keeps the controller from leading
// for its duration (KubeFledgedNoLeader), and so from releasing a node that
// joined with the startup taint, which stays held past the taint's timeout
// (KubeFledgedNodeHeldTooLong) until the controller leads; a cache of a good image succeeds
// (no alert); a cache with an image that never pulls fails, which makes
// the share of failed pulls high and the operation as slow as the pull
// deadline (KubeFledgedPullFailuresHigh, KubeFledgedOperationsSlow), and
// keeps failing through the refresh after it (KubeFledgedImageCacheFailing);
// then the controller stops and nothing answers (KubeFledgedControllerDown).
func TestAlertsOnScrapedSeries(t *testing.T) {
	g := NewWithT(t)
	d := sandboxDurations(t)
	deadline, refresh := d.deadline, d.refresh
	ns := namespace(t)
	addr := framework.FreeAddr(t)
	ctx := context.Background()

	// The controller's leader election Lease, held by another for 20s from
	// the moment the controller first sees it: longer than the held node's
	// alert threshold and a few scrapes.
	opts := commands.NewControllerOptions()
	g.Expect(k8s.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: opts.LeaderElectionID},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To("another-controller"), LeaseDurationSeconds: ptr.To[int32](20),
			AcquireTime: &metav1.MicroTime{Time: time.Now()}, RenewTime: &metav1.MicroTime{Time: time.Now()},
		},
	})).To(Succeed())

	// A node that joins with the startup taint while no controller leads.
	held := heldNodes("halert-"+rand.String(4), 1)[0]
	addNodes(t, g, held)

	rec := startRecorder(t, addr, ns)
	rec.event("started")
	// The failing cache's pull that never ends must have a pod of its own:
	// kwok renders one kind of trouble per pod, and in one node Job with the
	// image that cannot be pulled it would be settled with that one, at once.
	// Nodes declared to pull a pod's images all at once have each pull
	// counted, so the default per-node cap of 2 splits the cache's three
	// images into a Job of two and one of the hanging image.
	labelNodes(t, g, pacing.LabelParallelPulls, "3")
	stop := runController(t, func(o *commands.ControllerOptions) {
		o.MetricsAddr, o.SecureMetrics = addr, false // framework.Scrape reads plain HTTP
		o.LeaderElect = true
		o.LeaderElectionNamespace = ns
		o.Deadline.Value = deadline
		o.RefreshEvery.Value = refresh
		o.StartupTaint.Value = d.taint
		o.StartupTaintTimeout.Value = d.taintTimeout
	})
	g.Eventually(func(g Gomega) {
		g.Expect(framework.Scrape(g, addr)).To(HaveKeyWithValue(fmt.Sprintf(`leader_election_master_status{name=%q}`, opts.LeaderElectionID), 1.0))
	}).WithTimeout(framework.ClusterTimeout).WithPolling(200 * time.Millisecond).Should(Succeed())
	rec.event("leader")
	// The leader releases the node at once: no cache applies to it, and its
	// timeout is long past anyway.
	released(g, held.Name, d.taint)
	rec.event("node-released")

	t0 := framework.Tick()
	g.Expect(k8s.Create(ctx, newCache(ns, "warm", list("traefik:3.1")))).To(Succeed())
	c := framework.Final(g, k8s, client.ObjectKey{Namespace: ns, Name: "warm"}, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	rec.event("warm-succeeded")
	// A node that joins held while a controller leads: the good cache's
	// image is pulled onto it (the leader serves it as waited for) and it is
	// released, well before the alert's threshold.
	late := heldNodes("hlate-"+rand.String(4), 1)[0]
	addNodes(t, g, late)
	released(g, late.Name, d.taint)
	rec.event("late-released")
	// A stretch with only good pulls and fast operations behind.
	time.Sleep(5 * time.Second)

	rec.event("failing-created")
	t0 = framework.Tick()
	// The pull that never ends, in a Job of its own (see labelNodes above),
	// keeps the operation to its deadline; a node pull Job settles the image
	// that cannot be pulled at once.
	g.Expect(k8s.Create(ctx, newCache(ns, "failing", list("nginx:1.27", sandbox.FailPrefix+"alerts:1", sandbox.HangPrefix+"alerts:1")))).To(Succeed())
	key := client.ObjectKey{Namespace: ns, Name: "failing"}
	c = framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusFailed))
	rec.event("failing-failed")
	c = framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheRefresh, c.Status.CompletionTime.Time, refresh+opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusFailed))
	rec.event("failing-refreshed")
	// Past the failing alert's threshold (a refresh period and two
	// deadlines after Ready turned False), with a margin for its evaluation.
	ready := c.Status.Conditions[slices.IndexFunc(c.Status.Conditions, func(c metav1.Condition) bool { return c.Type == v1alpha2.ConditionReady })]
	time.Sleep(time.Until(ready.LastTransitionTime.Add(refresh + 2*deadline + 6*time.Second)))

	stop()
	rec.event("stopped")
	time.Sleep(18 * time.Second)
	out := rec.finish(t)
	if *updateScrapes {
		// Before the check, so that a failing run can be read too.
		b, err := os.ReadFile(out)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(os.WriteFile(committedScrapes, b, 0o644)).To(Succeed())
		t.Logf("wrote %s", committedScrapes)
	}

	// The alerts, on these very scrapes.
	cmd := exec.Command("go", "test", "-count=1", "-v", "-run", "^TestAlertsOnSandboxRun$", ".")
	cmd.Dir = monitoringModule
	cmd.Env = append(os.Environ(), "KUBEFLEDGED_SCRAPES="+out)
	res, err := cmd.CombinedOutput()
	t.Logf("test/monitoring on this run's scrapes:\n%s", res)
	if err != nil {
		t.Fatalf("the alerts do not hold on this run's scrapes: %v", err)
	}
}

// released waits for a node to lose the startup taint.
func released(g Gomega, node string, taint *plan.StartupTaint) {
	g.Eventually(func(g Gomega) {
		n := &corev1.Node{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Name: node}, n)).To(Succeed())
		g.Expect(taint.On(n)).To(BeFalse())
	}).WithTimeout(framework.ClusterTimeout).WithPolling(200*time.Millisecond).Should(Succeed(), "node %s released", node)
}

// sandboxSettings are the controller settings of the chart values the alert
// tests render.
type sandboxSettings struct {
	deadline, refresh, taintTimeout time.Duration
	taint                           *plan.StartupTaint
}

func sandboxDurations(t *testing.T) sandboxSettings {
	t.Helper()
	raw, err := os.ReadFile(sandboxValues)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Controller struct {
			ImagePullDeadlineDuration  string `json:"imagePullDeadlineDuration"`
			ImageCacheRefreshFrequency string `json:"imageCacheRefreshFrequency"`
			NodeStartupTaint           string `json:"nodeStartupTaint"`
			NodeStartupTaintTimeout    string `json:"nodeStartupTaintTimeout"`
		} `json:"controller"`
	}
	if err := yaml.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	var d sandboxSettings
	for _, p := range []struct {
		to  *time.Duration
		val string
	}{
		{&d.deadline, v.Controller.ImagePullDeadlineDuration},
		{&d.refresh, v.Controller.ImageCacheRefreshFrequency},
		{&d.taintTimeout, v.Controller.NodeStartupTaintTimeout},
	} {
		if *p.to, err = time.ParseDuration(p.val); err != nil {
			t.Fatalf("%s: %v", sandboxValues, err)
		}
	}
	if d.taint, err = plan.ParseStartupTaint(v.Controller.NodeStartupTaint); err != nil {
		t.Fatalf("%s: %v", sandboxValues, err)
	}
	return d
}

// recorder scrapes the controller's metrics every second, as a Prometheus
// with a 1s scrape interval would, and keeps what test/monitoring needs in
// the format test/monitoring/scrapes.go reads: the kubefledged_* series and
// the leader gauge, as deltas, and the name of every sample served.
type recorder struct {
	addr, namespace string
	client          *http.Client

	mu       sync.Mutex
	body     strings.Builder
	exported map[string]bool
	// last is what the latest scrape saw; nil after a failed one, so that
	// the next lists every series again.
	last map[string]string

	stop chan struct{}
	done chan struct{}
}

func startRecorder(t *testing.T, addr, ns string) *recorder {
	r := &recorder{addr: addr, namespace: ns, client: &http.Client{Timeout: 900 * time.Millisecond},
		exported: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			r.scrape()
			select {
			case <-r.stop:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() {
		select {
		case <-r.stop:
		default:
			close(r.stop)
			<-r.done
		}
	})
	return r
}

// kept says whether a sample is one the alerts read.
func kept(name string) bool {
	return strings.HasPrefix(name, "kubefledged_") || name == "leader_election_master_status"
}

func (r *recorder) scrape() {
	at := time.Now()
	seen, err := r.get()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		fmt.Fprintf(&r.body, "# scrape %d failed\n", at.UnixMilli())
		r.last = nil
		return
	}
	fmt.Fprintf(&r.body, "# scrape %d ok\n", at.UnixMilli())
	var changed, gone []string
	for s, v := range seen {
		if old, ok := r.last[s]; !ok || old != v {
			changed = append(changed, s+" "+v)
		}
	}
	for s := range r.last {
		if _, ok := seen[s]; !ok {
			gone = append(gone, "- "+s)
		}
	}
	slices.Sort(changed)
	slices.Sort(gone)
	for _, l := range append(changed, gone...) {
		r.body.WriteString(l + "\n")
	}
	r.last = seen
}

// get reads one scrape: the kept series with their values as served.
func (r *recorder) get() (map[string]string, error) {
	resp, err := r.client.Get("http://" + r.addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %s", resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	r.mu.Lock()
	defer r.mu.Unlock()
	for series, value := range framework.Samples(body) {
		name, _, _ := strings.Cut(series, "{")
		r.exported[name] = true
		if kept(name) {
			out[series] = value
		}
	}
	return out, nil
}

func (r *recorder) event(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(&r.body, "# event %d %s\n", time.Now().UnixMilli(), name)
}

// finish stops scraping and writes the recording to a file of the test's.
func (r *recorder) finish(t *testing.T) string {
	close(r.stop)
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	names := make([]string, 0, len(r.exported))
	for n := range r.exported {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteString("# kube-fledged scrapes v1\n")
	b.WriteString("# note written by test/e2e/imagecache TestAlertsOnScrapedSeries (-update-scrapes), read by test/monitoring\n")
	fmt.Fprintf(&b, "# namespace %s\n", r.namespace)
	for len(names) > 0 {
		n := min(len(names), 8)
		fmt.Fprintf(&b, "# exported %s\n", strings.Join(names[:n], " "))
		names = names[n:]
	}
	b.WriteString(r.body.String())
	out := filepath.Join(t.TempDir(), "scrapes.txt")
	if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}
