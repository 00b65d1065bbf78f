package report

import (
	"os"
	"path/filepath"
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
	for _, p := range []string{JSONPath, PagePath, LimitsPath} {
		raw, err := os.ReadFile(filepath.Join(root, p))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(os.MkdirAll(filepath.Dir(filepath.Join(tmp, p)), 0o755)).To(Succeed())
		g.Expect(os.WriteFile(filepath.Join(tmp, p), raw, 0o644)).To(Succeed())
	}
	g.Expect(Render(tmp)).To(Succeed())
	for _, p := range []string{JSONPath, PagePath} {
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
