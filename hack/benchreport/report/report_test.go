package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/test/framework/repo"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// The checked-in page is what the checked-in JSON renders to: a change of the renderer
// that changes the page shows here, and is committed with the page it gives.
func TestRenderCheckedIn(t *testing.T) {
	g := NewWithT(t)
	root, err := repo.Root()
	g.Expect(err).NotTo(HaveOccurred())
	tmp := t.TempDir()
	files := []string{JSONPath, PagePath, LimitsPath}
	if _, err := os.Stat(filepath.Join(root, TunedJSONPath)); err == nil {
		files = append(files, TunedJSONPath)
	}
	for _, p := range files {
		raw, err := os.ReadFile(filepath.Join(root, p))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(os.MkdirAll(filepath.Dir(filepath.Join(tmp, p)), 0o755)).To(Succeed())
		g.Expect(os.WriteFile(filepath.Join(tmp, p), raw, 0o644)).To(Succeed())
	}
	g.Expect(Render(tmp)).To(Succeed())
	for _, p := range files {
		if p == LimitsPath {
			continue
		}
		want, err := os.ReadFile(filepath.Join(root, p))
		g.Expect(err).NotTo(HaveOccurred())
		got, err := os.ReadFile(filepath.Join(tmp, p))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(got)).To(Equal(string(want)), "%s rendered again differs from the checked-in one", p)
	}
}

// A target follows from its figure, whatever the run recorded.
func TestTargetsFollowFigures(t *testing.T) {
	g := NewWithT(t)
	r := &Report{}
	r.Scenarios.SteadyRefresh = &RefreshResult{Refreshes: 3, JobsCreated: 0}
	g.Expect(r.EvalTargets()).To(ContainElement(HaveField("Pass", "pass")))
	r.Scenarios.SteadyRefresh.JobsCreated = 1
	g.Expect(r.EvalTargets()[0].Pass).To(Equal("FAIL"))
	// Without the known-limits file the page has no such section, and still renders.
	g.Expect(r.Markdown(nil)).To(HavePrefix("# Benchmarks\n"))
	g.Expect(r.Markdown([]byte("## Known limits\n\nnone\n"))).To(ContainSubstring("## Known limits\n\nnone\n"))
}

// The report names the sandbox's profiles as the sandbox does.
func TestProfilesAreTheSandboxs(t *testing.T) {
	g := NewWithT(t)
	g.Expect(ProfileTuned).To(Equal(string(sandbox.ProfileTuned)))
	g.Expect(ProfileStock).To(Equal(string(sandbox.ProfileStock)))
}

// Scenario 6's targets hold the re-checks against the images the node status leaves out,
// and its section renders what the refresh cost.
func TestWarmRefresh(t *testing.T) {
	g := NewWithT(t)
	p := &Phase{Name: "scenario 6, default caps", Pairs: 100, Seconds: 3,
		Requests: RequestDelta{ByVerbResource: map[string]int{"create jobs": 2, "delete jobs": 2, "patch imagecaches": 3, "list nodes": 1}, Total: 8},
		Metrics:  map[string]float64{`kubefledged_image_pulls_total{result="succeeded"}`: 5},
		Jobs:     JobFigures{Created: 2, Succeeded: 2, Pairs: 5, PairsDone: 5},
		Status:   &StatusFigures{Status: "Succeeded", Counts: v1alpha2.Counts{Desired: 100, AlreadyPresent: 95, Succeeded: 5}}}
	w := &WarmResult{Nodes: 2, Images: 50, Pairs: 100, OtherImagesMax: 5, ReportedPairs: 95, UnreportedPairs: 5,
		NodesByUnreported: map[string]int{"0": 1, "5": 1}, RecheckedPairs: 5, RecheckedMaxPerNode: 5, WritesPerPair: 0.07, Phase: p}
	r := &Report{}
	r.Scenarios.WarmRefresh = w
	byFigure := func() map[string]Target {
		out := map[string]Target{}
		for _, t := range r.EvalTargets() {
			g.Expect(t.Scenario).To(Equal("6"))
			out[t.Figure] = t
		}
		return out
	}
	targets := byFigure()
	g.Expect(targets).To(HaveKeyWithValue("API writes per (image, node) in a warm refresh", HaveField("Value", "0.070 (7 writes, 100 pairs)")))
	g.Expect(targets).To(HaveKeyWithValue("images re-checked per node equals the images not in node status", HaveField("Pass", "pass")))
	g.Expect(targets).To(HaveKeyWithValue("re-checks that found the image (pull succeeded; none failed)", HaveField("Pass", "pass")))

	md := r.Markdown(nil)
	g.Expect(md).To(ContainSubstring("## Scenario 6: warm refresh of 2 nodes × 50 images"))
	g.Expect(md).To(ContainSubstring("| nodes by cached images left out of their status | 0: 1 nodes, 5: 1 nodes |"))
	g.Expect(md).To(ContainSubstring("| `patch imagecaches` | 3 |"))

	// A node re-checked an image its status lists, another not one it leaves out.
	w.NodesMismatched, w.RecheckedPairs = []string{"n0", "n1"}, 5
	g.Expect(byFigure()["images re-checked per node equals the images not in node status"].Pass).To(Equal("FAIL"))
	w.NodesMismatched, w.RecheckedPairs = nil, 6
	g.Expect(byFigure()["images re-checked per node equals the images not in node status"].Pass).To(Equal("FAIL"))
	// A re-check that did not find its image.
	p.Metrics[`kubefledged_image_pulls_total{result="succeeded"}`] = 4
	g.Expect(byFigure()["re-checks that found the image (pull succeeded; none failed)"].Pass).To(Equal("FAIL"))
}

// coldRun is a scenario 1 on the given profile whose non-binding run took the given
// ratio of its floor.
func coldRun(profile string, ratio float64) *ColdResult {
	run := RunInfo{Started: "2026-12-04T00:00:00Z", Config: Config{Profile: profile}}
	return &ColdResult{Run: run, Nodes: 10, Images: 2, Pairs: 20, Floor: &FloorResult{Jobs: 20, Seconds: 100},
		Runs: []*Phase{{Name: "scenario 1, " + OpenCapsName, Caps: Caps{Name: OpenCapsName}, Pairs: 20, Seconds: 100 * ratio, RatioToFloor: ratio}}}
}

// The tuned run's figures stand beside the main run's, in the targets and in scenario 1's
// table, and the page says "not run" where it has none.
func TestTunedColumn(t *testing.T) {
	g := NewWithT(t)
	r := &Report{}
	r.Scenarios.ColdCache = coldRun(ProfileStock, 0.1)
	r.Targets = r.EvalTargets()
	const ratioRow = "| 1 non-binding caps | time to final status / floor | 0.10x (10 s / 100 s) | ≤ 0.2x (1/5 of the Job-per-pair floor) | pass |"

	md := r.Markdown(nil)
	g.Expect(md).To(ContainSubstring(ratioRow + " not run |"))
	g.Expect(md).To(ContainSubstring("| figure | floor (bare Jobs) | scenario 1, non-binding caps | tuned profile |"))
	g.Expect(md).To(ContainSubstring("| time (s) | 100.0 | 10.0 | not run |"))

	tuned := &Report{Generated: "2026-12-04T01:00:00Z"}
	tuned.Scenarios.ColdCache = coldRun(ProfileTuned, 1.5)
	tuned.Scenarios.FastPods = &FastResult{Exact: true, Runs: []*FastRun{{Exact: true}}, Run: RunInfo{Config: Config{FastRuns: 1}}}
	tuned.Targets = tuned.EvalTargets()
	r.Tuned = tuned
	md = r.Markdown(nil)
	// Scenario 1's target depends on the profile: the tuned cell names its own.
	g.Expect(md).To(ContainSubstring(ratioRow + " 1.50x (150 s / 100 s); FAIL (target ≤ 1.25x) |"))
	g.Expect(md).To(ContainSubstring("| 1 non-binding caps | Job writes per (image, node) | 0.00 | ≤ 2 | pass | 0.00; pass |"))
	// A figure only the tuned run measured comes with its scenario, after the main run's.
	g.Expect(md).To(ContainSubstring("| 4 | runs with every result seen, none failed or pending | not run | every run | — | 1 of 1; pass |"))
	g.Expect(strings.Index(md, "| 4 | runs with")).To(BeNumerically(">", strings.Index(md, "| 1 non-binding caps | controller peak RSS")))
	g.Expect(md).To(ContainSubstring("| figure | floor (bare Jobs) | scenario 1, non-binding caps | tuned: floor (bare Jobs) | tuned: scenario 1, non-binding caps |"))
	g.Expect(md).To(ContainSubstring("| time (s) | 100.0 | 10.0 | 100.0 | 150.0 |"))
	g.Expect(md).To(ContainSubstring("| ratio to floor | 1 | 0.10x | 1 | 1.50x |"))
	g.Expect(md).To(ContainSubstring("on the tuned control plane; the *tuned* columns, 10 nodes × 2 images"))
	g.Expect(md).To(ContainSubstring("from `docs/benchmarks-tuned.json` (written 2026-12-04T01:00:00Z"))
}

// A tuned run writes its own file, which Render reads beside the main one and writes
// back with its targets evaluated.
func TestRenderReadsTuned(t *testing.T) {
	g := NewWithT(t)
	root := t.TempDir()
	g.Expect(os.MkdirAll(filepath.Join(root, "docs"), 0o755)).To(Succeed())
	g.Expect(JSONPathOf(ProfileStock)).To(Equal(JSONPath))
	g.Expect(JSONPathOf("")).To(Equal(JSONPath))
	g.Expect(JSONPathOf(ProfileTuned)).To(Equal(TunedJSONPath))

	stock := &Report{Config: Config{Profile: ProfileStock}}
	stock.Scenarios.ColdCache = coldRun(ProfileStock, 0.1)
	g.Expect(stock.WriteJSON(root)).To(Succeed())
	g.Expect(Render(root)).To(Succeed())
	page, err := os.ReadFile(filepath.Join(root, PagePath))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(page)).To(ContainSubstring("there is none yet"))
	g.Expect(filepath.Join(root, TunedJSONPath)).NotTo(BeAnExistingFile())

	tuned := &Report{Config: Config{Profile: ProfileTuned}}
	tuned.Scenarios.ColdCache = coldRun(ProfileTuned, 0.5)
	g.Expect(tuned.WriteJSON(root)).To(Succeed())
	g.Expect(Render(root)).To(Succeed())
	page, err = os.ReadFile(filepath.Join(root, PagePath))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(page)).To(ContainSubstring("| 0.50x (50 s / 100 s); pass (target ≤ 1.25x) |"))
	back, err := Read(filepath.Join(root, TunedJSONPath))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back.Targets).To(ContainElement(HaveField("Value", "0.50x (50 s / 100 s)")))
	main, err := Read(filepath.Join(root, JSONPath))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(main.Scenarios.ColdCache.Runs[0].RatioToFloor).To(Equal(0.1))
}

// The original's figures are held against ours of the same run, and the page says which
// version ran.
func TestOriginalBesideOurs(t *testing.T) {
	g := NewWithT(t)
	r := &Report{}
	ours := &Phase{Name: "scenario 7, default caps", Caps: Caps{Name: "default caps"}, Seconds: 50}
	r.Scenarios.Original = &OriginalResult{
		ColdResult: ColdResult{Nodes: 100, Images: 10, Pairs: 1000, Floor: &FloorResult{Seconds: 300}, Runs: []*Phase{ours}},
		Version:    "v0.10.0",
		Original:   &Phase{Name: "the original v0.10.0", Seconds: 600, RatioToFloor: 2, Status: &StatusFigures{Status: "Succeeded"}},
	}
	g.Expect(r.EvalTargets()).To(ConsistOf(
		HaveField("Value", "Succeeded; 2.00x (600 s / 300 s)"),
		HaveField("Value", "12.0x (600 s / 50 s)"),
	))
	page := r.Markdown(nil)
	g.Expect(page).To(ContainSubstring("## Scenario 7: the original kube-fledged beside ours, 100 nodes × 10 images (1000 pulls)"))
	g.Expect(page).To(ContainSubstring("the original is v0.10.0, built from its source"))
	g.Expect(page).To(ContainSubstring("| the original v0.10.0 | scenario 7, default caps |"))
}

// Scenarios 8 to 10 are held against issue 30's targets, their rows stand after the
// lower-numbered scenarios' (10 after 2, not beside 1), and their sections render.
func TestScaleScenarios(t *testing.T) {
	g := NewWithT(t)
	ok := &StatusFigures{Status: "Succeeded", Counts: v1alpha2.Counts{Desired: 100, AlreadyPresent: 100}}
	r := &Report{}
	r.Scenarios.NewNodes = &NewNodesResult{NewNodes: 1, Images: 10, Phase: &Phase{Caps: Caps{MaxJobsPerNode: 2}}}
	r.Scenarios.ScaleCold = &ScaleResult{NodesWanted: 5000, Nodes: 3500, ShortBy: "nodes 3500 to 3999 did not settle", Images: 10, Pairs: 35000,
		Floor: &FloorResult{Seconds: 100}, Exact: true, WritesPerPair: 0.21, RSSPerNodeKiB: 20,
		Phase: &Phase{Seconds: 120, RatioToFloor: 1.2, ControllerStartRSSMiB: 60, ControllerPeakRSSMiB: 130}}
	r.Scenarios.ScaleWarm = &WarmResult{Nodes: 2, Images: 50, Pairs: 100, WritesPerPair: 0.02,
		Phase: &Phase{Seconds: 4, Status: ok, Requests: RequestDelta{ByVerbResource: map[string]int{"patch imagecaches": 2}}}}
	r.Scenarios.SmallBeside = &FairnessResult{SmallNodes: 2, SmallImages: 10, LargeNodes: 1000, LargeImages: 10, Ratio: 2.5, LargeRunning: true,
		Alone: &Phase{Seconds: 4, Status: ok}, Beside: &Phase{Seconds: 10, Status: ok}, Large: &Phase{Seconds: 200, Status: ok}}
	r.Targets = r.EvalTargets()
	byFigure := map[string]Target{}
	for _, t := range r.Targets {
		byFigure[t.Scenario+" "+t.Figure] = t
	}
	g.Expect(byFigure).To(HaveKeyWithValue("8 kwok nodes the sandbox held", And(HaveField("Pass", "pass"), HaveField("Value", ContainSubstring("3500 of 5000 (nodes 3500")))))
	g.Expect(byFigure).To(HaveKeyWithValue("8 final status: every pair succeeded, counts exact", HaveField("Pass", "pass")))
	g.Expect(byFigure).To(HaveKeyWithValue("8 time to final status / one-Job-per-node floor", HaveField("Value", "1.20x (120 s / 100 s)")))
	g.Expect(byFigure).To(HaveKeyWithValue("8 API writes per (image, node)", HaveField("Pass", "pass")))
	g.Expect(byFigure).To(HaveKeyWithValue("8 controller peak RSS", HaveField("Pass", "pass")))
	g.Expect(byFigure).To(HaveKeyWithValue("9 Jobs created by a warm refresh (every image in node status)", HaveField("Pass", "pass")))
	g.Expect(byFigure).To(HaveKeyWithValue("9 API writes per (image, node) in a warm refresh at scale", HaveField("Pass", "pass")))
	const fair = "10 a 2 × 10 cache's time to final status beside a 1000 × 10 one / alone"
	g.Expect(byFigure).To(HaveKeyWithValue(fair, And(HaveField("Value", "2.50x (10.0 s / 4.0 s)"), HaveField("Pass", "pass"))))

	md := r.Markdown(nil)
	g.Expect(strings.Index(md, "| 10 | a 2 × 10")).To(BeNumerically(">", strings.Index(md, "| 9 | Jobs created")))
	g.Expect(strings.Index(md, "| 9 | Jobs created")).To(BeNumerically(">", strings.Index(md, "| 2 | first Job")))
	g.Expect(md).To(ContainSubstring("## Scenario 8: cold cache at the largest cluster, 3500 nodes × 10 images (35000 pulls), default caps"))
	g.Expect(md).To(ContainSubstring("| controller peak RSS at 5000 nodes by that slope | 158 MiB |"))
	g.Expect(md).To(ContainSubstring("## Scenario 9: warm refresh at the largest cluster, 2 nodes × 50 images"))
	g.Expect(md).To(ContainSubstring("the nodes hold no other images"))
	g.Expect(md).To(ContainSubstring("## Scenario 10: a 2 × 10 cache created while a 1000 × 10 cache runs"))

	// A trial at a few hundred nodes is not the largest cluster, even with every node held.
	r.Scenarios.ScaleCold.Nodes, r.Scenarios.ScaleCold.NodesWanted, r.Scenarios.ScaleCold.ShortBy = 600, 600, ""
	g.Expect(r.EvalTargets()).To(ContainElement(And(HaveField("Figure", "kwok nodes the sandbox held"), HaveField("Value", "600 of 600"), HaveField("Pass", "FAIL"))))

	// The ratio holds only while the large cache runs, and beyond 3x it fails.
	r.Scenarios.SmallBeside.LargeRunning = false
	g.Expect(r.EvalTargets()).To(ContainElement(And(HaveField("Scenario", "10"), HaveField("Pass", "FAIL"), HaveField("Value", ContainSubstring("ended first")))))
	r.Scenarios.SmallBeside.LargeRunning, r.Scenarios.SmallBeside.Ratio = true, 3.1
	g.Expect(r.EvalTargets()).To(ContainElement(And(HaveField("Scenario", "10"), HaveField("Pass", "FAIL"))))
	r.Scenarios.ScaleWarm.Phase.Jobs.Created = 1
	g.Expect(r.EvalTargets()).To(ContainElement(And(HaveField("Figure", HavePrefix("Jobs created by a warm refresh")), HaveField("Pass", "FAIL"))))
}

// Progress writes per second leave out the start and final write of every
// operation the writes span, over the span they were counted in: scenario 2
// counts from the nodes' creation, and its new nodes can start a second
// operation while the first runs.
func TestProgressWritesPerSecond(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Phase
		want float64
	}{
		{"one operation over its own time", Phase{Seconds: 40, StatusWrites: 42}, 1},
		{"a span longer than the phase's time", Phase{Seconds: 4.2, StatusWrites: 8, StatusWritesSeconds: 6}, 1},
		{"two operations", Phase{Seconds: 4.2, StatusWrites: 8, StatusWritesSeconds: 8, StatusOperations: 2}, 0.5},
		{"no time", Phase{StatusWrites: 3}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(progressWritesPerSecond(&tc.p)).To(BeNumerically("~", tc.want, 1e-9))
		})
	}
}
