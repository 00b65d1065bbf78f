package monitoring

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/util/teststorage"
)

// The chart renderings the tests read (test/golden keeps them equal to the
// chart), and the scrapes of the sandbox run, which test/e2e/imagecache
// passes in KUBEFLEDGED_SCRAPES when it has just made them.
var (
	goldenDir        = filepath.Join("..", "golden", "testdata")
	sandboxRendering = filepath.Join(goldenDir, "monitoring-sandbox.golden")
	committedScrapes = filepath.Join("testdata", "sandbox-run.txt")
)

// target is what the chart's ServiceMonitor makes Prometheus attach to the
// controller's series for release "kubefledged" in "kube-fledged", the
// release test/golden renders: the rules select on it.
var target = labels.FromStrings("job", "kubefledged-metrics", "namespace", "kube-fledged", "instance", "10.0.0.1:8080")

func scrapesFile() string {
	if f := os.Getenv("KUBEFLEDGED_SCRAPES"); f != "" {
		return f
	}
	return committedScrapes
}

func loadRecording(t *testing.T) *Recording {
	t.Helper()
	f, err := os.Open(scrapesFile())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rec, err := ParseRecording(f)
	if err != nil {
		t.Fatalf("%s: %v", scrapesFile(), err)
	}
	return rec
}

// evaluateRun has Prometheus's rule manager evaluate the sandbox rendering's
// rules every second of the recorded run, its series stored under the
// target labels given; it returns the evaluations and the rule file.
func evaluateRun(t *testing.T, target labels.Labels) (timeline, []byte) {
	t.Helper()
	rec := loadRecording(t)
	golden, err := os.ReadFile(sandboxRendering)
	if err != nil {
		t.Fatal(err)
	}
	ruleFile, err := RuleFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	db := teststorage.New(t)
	ctx := context.Background()
	if err := rec.Load(ctx, db, target); err != nil {
		t.Fatal(err)
	}
	evals, err := Evaluate(ctx, ruleFile, db, rec.Start(), rec.End(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return timeline{t: t, rec: rec, evals: evals}, ruleFile
}

// timeline is the rules' evaluations over a run, with what the run did.
type timeline struct {
	t     *testing.T
	rec   *Recording
	evals []Evaluation
}

func (tl timeline) event(name string) time.Time {
	tl.t.Helper()
	at, err := tl.rec.Event(name)
	if err != nil {
		tl.t.Fatal(err)
	}
	return at
}

// is says whether f is alert, with labels matching match.
func (f Firing) is(alert string, match map[string]string) bool {
	if f.Alert != alert {
		return false
	}
	for k, v := range match {
		if f.Labels.Get(k) != v {
			return false
		}
	}
	return true
}

// firing lists the evaluations in [from, to] at which alert fired with
// labels matching match.
func (tl timeline) firing(alert string, match map[string]string, from, to time.Time) []time.Time {
	var out []time.Time
	for _, ev := range tl.evals {
		if ev.At.Before(from) || ev.At.After(to) {
			continue
		}
		for _, f := range ev.Firing {
			if f.is(alert, match) {
				out = append(out, ev.At)
				break
			}
		}
	}
	return out
}

// annotation is an annotation of the alert's first firing with labels
// matching match, expanded as at that evaluation.
func (tl timeline) annotation(alert string, match map[string]string, name string) string {
	tl.t.Helper()
	for _, ev := range tl.evals {
		for _, f := range ev.Firing {
			if f.is(alert, match) {
				return f.Annotations.Get(name)
			}
		}
	}
	tl.t.Errorf("%s%v never fires", alert, match)
	return ""
}

// spans says when each alert fired, by label set, in seconds of the run.
func (tl timeline) spans() []string {
	type key struct{ alert, labels string }
	open := map[key]time.Time{}
	last := map[key]time.Time{}
	var out []string
	flush := func(k key) {
		out = append(out, fmt.Sprintf("%s%s fired from %s to %s", k.alert, k.labels,
			open[k].Sub(tl.rec.Start()).Round(time.Second), last[k].Sub(tl.rec.Start()).Round(time.Second)))
		delete(open, k)
	}
	for _, ev := range tl.evals {
		seen := map[key]bool{}
		for _, f := range ev.Firing {
			k := key{f.Alert, f.Labels.String()}
			seen[k] = true
			if _, ok := open[k]; !ok {
				open[k] = ev.At
			}
			last[k] = ev.At
		}
		for k := range open {
			if !seen[k] {
				flush(k)
			}
		}
	}
	for k := range open {
		flush(k)
	}
	sort.Strings(out)
	return out
}

func (tl timeline) span(from, to time.Time) string {
	return fmt.Sprintf("[%s, %s] of the run", from.Sub(tl.rec.Start()).Round(time.Second), to.Sub(tl.rec.Start()).Round(time.Second))
}

// fires: the alert fires at some evaluation in [from, to].
func (tl timeline) fires(alert string, match map[string]string, from, to time.Time) {
	tl.t.Helper()
	if len(tl.firing(alert, match, from, to)) == 0 {
		tl.t.Errorf("%s%v does not fire in %s", alert, match, tl.span(from, to))
	}
}

// firesThroughout: it fires at every evaluation in [from, to].
func (tl timeline) firesThroughout(alert string, match map[string]string, from, to time.Time) {
	tl.t.Helper()
	want := 0
	for _, ev := range tl.evals {
		if !ev.At.Before(from) && !ev.At.After(to) {
			want++
		}
	}
	if got := len(tl.firing(alert, match, from, to)); want == 0 || got != want {
		tl.t.Errorf("%s%v fires at %d of the %d evaluations in %s", alert, match, got, want, tl.span(from, to))
	}
}

// quiet: it fires at no evaluation in [from, to].
func (tl timeline) quiet(alert string, match map[string]string, from, to time.Time) {
	tl.t.Helper()
	if at := tl.firing(alert, match, from, to); len(at) > 0 {
		tl.t.Errorf("%s%v fires in %s, first at %s", alert, match, tl.span(from, to), at[0].Sub(tl.rec.Start()).Round(time.Second))
	}
}

// threshold reads the number an alert's expression ends comparing with.
func threshold(t *testing.T, ruleFile []byte, alert string) float64 {
	t.Helper()
	p := parser.NewParser(parser.Options{})
	groups, errs := rulefmt.Parse(ruleFile, false, model.UTF8Validation, p, promslog.NewNopLogger())
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert != alert {
				continue
			}
			expr, err := p.ParseExpr(r.Expr)
			if err != nil {
				t.Fatal(err)
			}
			be, ok := expr.(*parser.BinaryExpr)
			if !ok {
				t.Fatalf("%s: %s is not a comparison", alert, expr)
			}
			n, ok := be.RHS.(*parser.NumberLiteral)
			if !ok {
				t.Fatalf("%s: %s does not compare with a number", alert, expr)
			}
			return n.Val
		}
	}
	t.Fatalf("no alert %s", alert)
	return 0
}

// TestAlertsOnSandboxRun evaluates the PrometheusRule the chart renders for
// the sandbox's durations (test/golden/testdata/monitoring-sandbox.*) with
// Prometheus's rule manager, every second of a run of the controller
// (test/e2e/imagecache TestAlertsOnScrapedSeries), on what the controller
// served then, and holds each alert to when its cause was there.
func TestAlertsOnSandboxRun(t *testing.T) {
	tl, ruleFile := evaluateRun(t, target)
	rec := tl.rec
	started, leader := tl.event("started"), tl.event("leader")
	warmDone, failingCreated := tl.event("warm-succeeded"), tl.event("failing-created")
	failed, stopped := tl.event("failing-failed"), tl.event("stopped")
	t.Logf("%s: %d scrapes over %s; leader after %s, the good cache Succeeded at %s, the failing one Failed at %s, stopped at %s",
		scrapesFile(), len(rec.Scrapes), rec.End().Sub(rec.Start()).Round(time.Second), leader.Sub(started).Round(time.Second),
		warmDone.Sub(rec.Start()).Round(time.Second), failed.Sub(rec.Start()).Round(time.Second), stopped.Sub(rec.Start()).Round(time.Second))
	for _, l := range tl.spans() {
		t.Log(l)
	}
	const slack = 3 * time.Second // a scrape, an evaluation, a second of rounding

	// Another holds the Lease: the controller runs and does not lead.
	tl.fires("KubeFledgedNoLeader", nil, started, leader)
	tl.quiet("KubeFledgedNoLeader", nil, leader.Add(slack), stopped)

	// Nothing fires while only good images are pulled, fast.
	for _, a := range []string{"KubeFledgedPullFailuresHigh", "KubeFledgedOperationsSlow", "KubeFledgedImageCacheFailing", "KubeFledgedControllerDown"} {
		tl.quiet(a, nil, leader, failingCreated)
	}

	// One failing image of two, on every node, among the good pulls before.
	tl.fires("KubeFledgedPullFailuresHigh", nil, failed, stopped)
	// Its operation waited for the pull deadline.
	tl.fires("KubeFledgedOperationsSlow", map[string]string{"operation": "ImageCacheCreate"}, failed, stopped)

	// The failing cache alerts once it has failed through a refresh period
	// and the refresh after it, and not before: not while the refresh that
	// could fix it runs. The good cache never does.
	failing := map[string]string{"imagecache_namespace": rec.Namespace, "imagecache": "failing", "severity": "warning"}
	since := failingSince(t, rec, "failing")
	if since.Before(failingCreated) {
		t.Errorf("the failing cache is failing since %s, before it was created", since)
	}
	after := time.Duration(threshold(t, ruleFile, "KubeFledgedImageCacheFailing")) * time.Second
	tl.quiet("KubeFledgedImageCacheFailing", failing, rec.Start(), since.Add(after-time.Second))
	tl.quiet("KubeFledgedImageCacheFailing", failing, rec.Start(), tl.event("failing-refreshed"))
	tl.firesThroughout("KubeFledgedImageCacheFailing", failing, since.Add(after+slack), stopped)
	tl.quiet("KubeFledgedImageCacheFailing", map[string]string{"imagecache": "warm"}, rec.Start(), rec.End())

	// A node joined with the startup taint while no controller led: it is
	// held past the threshold, and the alert names it, until the leader
	// releases it. The node that joined later, under a leader, was released
	// long before the threshold.
	node, created := heldSince(t, rec, 0)
	heldFor := time.Duration(threshold(t, ruleFile, "KubeFledgedNodeHeldTooLong")) * time.Second
	released := tl.event("node-released")
	if released.Sub(created) < heldFor+2*slack {
		t.Fatalf("node %s held %s, too short for its alert at %s", node, released.Sub(created), heldFor)
	}
	held := map[string]string{"node": node}
	tl.quiet("KubeFledgedNodeHeldTooLong", held, rec.Start(), created.Add(heldFor-time.Second))
	// The series goes with the release, which the run notes when it next
	// polls the node: up to a scrape and an evaluation later.
	tl.firesThroughout("KubeFledgedNodeHeldTooLong", held, created.Add(heldFor+slack), released.Add(-slack))
	tl.quiet("KubeFledgedNodeHeldTooLong", held, released.Add(slack), rec.End())
	// The node that joined under a leader is released long before the
	// threshold, often before any scrape sees it held, so it is not looked
	// up by its series: the alert fires for no node but the first.
	for _, ev := range tl.evals {
		for _, f := range ev.Firing {
			if f.Alert == "KubeFledgedNodeHeldTooLong" && f.Labels.Get("node") != node {
				t.Errorf("KubeFledgedNodeHeldTooLong fires for node %s at %s", f.Labels.Get("node"), ev.At.Sub(rec.Start()).Round(time.Second))
			}
		}
	}
	desc := tl.annotation("KubeFledgedNodeHeldTooLong", held, "description")
	t.Logf("KubeFledgedNodeHeldTooLong's description: %s", desc)
	if !strings.Contains(desc, "node "+node+".") || strings.Contains(desc, "error") {
		t.Errorf("KubeFledgedNodeHeldTooLong's description does not name node %s: %q", node, desc)
	}

	// Nothing answers once the controller stops.
	tl.quiet("KubeFledgedControllerDown", nil, started, stopped)
	tl.firesThroughout("KubeFledgedControllerDown", nil, stopped.Add(10*time.Second+slack), rec.End())
}

// failingSince is the value of a cache's failing-since series, the first
// time the run served it.
func failingSince(t *testing.T, rec *Recording, cache string) time.Time {
	t.Helper()
	series := fmt.Sprintf(`kubefledged_imagecache_failing_since_timestamp_seconds{imagecache=%q,imagecache_namespace=%q}`, cache, rec.Namespace)
	for _, s := range rec.Scrapes {
		if v, ok := s.Series[series]; ok {
			return time.Unix(int64(v), 0)
		}
	}
	t.Fatalf("the run never served %s", series)
	return time.Time{}
}

// heldSince is the i-th node the run served as held, in the order first
// served, and its creation time.
func heldSince(t *testing.T, rec *Recording, i int) (string, time.Time) {
	t.Helper()
	const prefix = `kubefledged_node_held_since_timestamp_seconds{node="`
	seen := map[string]bool{}
	for _, s := range rec.Scrapes {
		var names []string
		for series := range s.Series {
			if strings.HasPrefix(series, prefix) && !seen[series] {
				seen[series] = true
				names = append(names, series)
			}
		}
		sort.Strings(names)
		for _, series := range names {
			if i == 0 {
				return strings.TrimSuffix(strings.TrimPrefix(series, prefix), `"}`), time.Unix(int64(s.Series[series]), 0)
			}
			i--
		}
	}
	t.Fatalf("the run served fewer held nodes than %d", i+1)
	return "", time.Time{}
}

// The expectations above must be able to fail: a rule that cannot see the
// series (another job) fires nowhere, one that always fires is caught.
func TestAlertExpectationsCanFail(t *testing.T) {
	tl, _ := evaluateRun(t, labels.FromStrings("job", "elsewhere", "namespace", "kube-fledged"))
	rec := tl.rec
	if got := tl.firing("KubeFledgedPullFailuresHigh", nil, rec.Start(), rec.End()); len(got) != 0 {
		t.Errorf("a rule selecting job=kubefledged-metrics fired on series of job=elsewhere")
	}
	if got := tl.firing("KubeFledgedNodeHeldTooLong", nil, rec.Start(), rec.End()); len(got) != 0 {
		t.Errorf("KubeFledgedNodeHeldTooLong fired on series of another job")
	}
	// ControllerDown fires all along: nothing of its job ever answers.
	if got := tl.firing("KubeFledgedControllerDown", nil, rec.Start(), rec.End()); len(got) == 0 {
		t.Errorf("KubeFledgedControllerDown did not fire without its job's series")
	}
}
