package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/kubefledged/kube-fledged/hack/benchreport/report"
)

// A run of some scenarios (BENCH_MERGE) keeps every other one from the last
// JSON of its profile, and scenario 1's CPU profiles with it; the scenarios
// it runs start empty, whatever the last JSON held.
func TestMergeKeepsTheScenariosNotRun(t *testing.T) {
	g := NewWithT(t)
	root := t.TempDir()
	prev := &report.Report{Profiles: map[string]string{"controller": "top"}}
	fields := reflect.ValueOf(&prev.Scenarios).Elem()
	for i := range fields.NumField() {
		fields.Field(i).Set(reflect.New(fields.Field(i).Type().Elem()))
	}
	raw, err := json.Marshal(prev)
	g.Expect(err).NotTo(HaveOccurred())
	file := filepath.Join(root, report.JSONPathOf(report.ProfileStock))
	g.Expect(os.MkdirAll(filepath.Dir(file), 0o755)).To(Succeed())
	g.Expect(os.WriteFile(file, raw, 0o644)).To(Succeed())

	r := newReport(config{Profile: report.ProfileStock, Scenarios: []int{2, 6, 9}}, root)
	g.Expect(r.merge(root)).To(Succeed())
	s := r.Scenarios
	g.Expect(s.NewNodes).To(BeNil())
	g.Expect(s.WarmRefresh).To(BeNil())
	g.Expect(s.ScaleWarm).To(BeNil())
	g.Expect(s.ScaleCold).NotTo(BeNil())
	g.Expect(s.SmallBeside).NotTo(BeNil())
	g.Expect(s.ColdCache).NotTo(BeNil())
	g.Expect(s.SteadyRefresh).NotTo(BeNil())
	g.Expect(s.FastPods).NotTo(BeNil())
	g.Expect(s.HeldNodes).NotTo(BeNil())
	g.Expect(s.Original).NotTo(BeNil())
	g.Expect(r.prevProfiles).To(HaveKey("controller"))

	r = newReport(config{Profile: report.ProfileStock, Scenarios: []int{1, 10}}, root)
	g.Expect(r.merge(root)).To(Succeed())
	g.Expect(r.Scenarios.ColdCache).To(BeNil())
	g.Expect(r.Scenarios.SmallBeside).To(BeNil())
	g.Expect(r.prevProfiles).To(BeNil())
}

// BENCH_REPORT_ROOT keeps a trial run's figures, and the ones BENCH_MERGE reads, out of
// the repository's docs/; BENCH_SCENARIOS takes 1 to 10.
func TestTrialRunConfig(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("BENCH_REPORT_ROOT", "")
	g.Expect(reportRoot("/repo")).To(Equal("/repo"))
	t.Setenv("BENCH_REPORT_ROOT", "/tmp/trial")
	g.Expect(reportRoot("/repo")).To(Equal("/tmp/trial"))

	t.Setenv("BENCH_SCENARIOS", "8,9,10")
	t.Setenv("BENCH_NODES_8", "3000")
	c, err := loadConfig()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Scenarios).To(Equal([]int{8, 9, 10}))
	g.Expect(c.ScaleNodes).To(Equal(3000))
	t.Setenv("BENCH_SCENARIOS", "11")
	_, err = loadConfig()
	g.Expect(err).To(MatchError(ContainSubstring("1 to 10")))
}
