package report

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

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
