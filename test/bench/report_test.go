package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"time"

	"github.com/kubefledged/kube-fledged/hack/benchreport/report"
)

// benchRun is the report of the run going on, and what finishing it needs.
type benchRun struct {
	*report.Report
	began        time.Time
	root         string
	prevProfiles map[string]string
}

func newReport(cfg config, root string) *benchRun {
	r := &benchRun{Report: &report.Report{Config: cfg}, began: time.Now(), root: root}
	r.Machine = report.Machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), LoadAvgStart: loadAvg()}
	r.Machine.MemoryGiB = memInfoGiB("MemTotal")
	if raw, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		r.Machine.Kernel = strings.TrimSpace(string(raw))
	}
	r.Machine.Kubernetes = version(filepath.Join(root, "bin", "kube-apiserver"), "--version")
	r.Machine.Kwok = version(filepath.Join(root, "bin", "kwok"), "--version")
	return r
}

// memInfoGiB is a field of /proc/meminfo, in GiB; 0 when it cannot be read.
func memInfoGiB(field string) float64 {
	raw, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	var kb float64
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(l, field+":") {
			fmt.Sscanf(strings.TrimPrefix(l, field+":"), "%f", &kb)
		}
	}
	return round(kb/1024/1024, 1)
}

func version(bin string, args ...string) string {
	out, err := exec.Command(bin, args...).Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

func loadAvg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// finish fixes the end of the run, the targets and the profile summaries.
func (r *benchRun) finish() {
	r.Generated = time.Now().UTC().Format(time.RFC3339)
	r.DurationMinutes = round(time.Since(r.began).Minutes(), 1)
	r.Machine.LoadAvgEnd = loadAvg()
	r.Targets = r.EvalTargets()
	r.Profiles = map[string]string{}
	if r.prevProfiles != nil {
		r.Profiles = r.prevProfiles
		return
	}
	if c := r.Scenarios.ColdCache; c != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for _, p := range c.Runs {
			if p.Profile == "" {
				continue
			}
			flat, err1 := pprofTop(ctx, p.Profile, false, 25)
			cum, err2 := pprofTop(ctx, p.Profile, true, 30)
			if err1 != nil || err2 != nil {
				r.Errors = append(r.Errors, fmt.Sprintf("profile of %s: %v %v", p.Name, err1, err2))
				continue
			}
			r.Profiles[p.Name+" (flat)"] = trimPprof(flat)
			r.Profiles[p.Name+" (cumulative)"] = trimPprof(cum)
			if rel, err := filepath.Rel(r.root, p.Profile); err == nil {
				p.Profile = rel
			}
		}
	}
}

// trimPprof drops pprof's header lines that name local files.
func trimPprof(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "File:") || strings.HasPrefix(l, "Build ID:") || strings.HasPrefix(l, "Type:") || strings.HasPrefix(l, "Time:") {
			continue
		}
		out = append(out, strings.TrimRight(l, " "))
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}

func (e *env) runInfo() runInfo {
	return runInfo{Started: time.Now().UTC().Format(time.RFC3339), LoadAvg: loadAvg(), Config: e.cfg}
}

// merge takes the scenarios this run did not measure from an earlier run's
// JSON on the same profile, so that the scenarios can be run (or re-run)
// one at a time.
func (r *benchRun) merge(root string) error {
	raw, err := os.ReadFile(filepath.Join(root, report.JSONPathOf(r.Config.Profile)))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	prev := &report.Report{}
	if err := json.Unmarshal(raw, prev); err != nil {
		return err
	}
	// The fields stand in scenario order: field i is scenario i+1.
	from, to := reflect.ValueOf(&prev.Scenarios).Elem(), reflect.ValueOf(&r.Scenarios).Elem()
	for i := range to.NumField() {
		if !r.Config.Runs(i + 1) {
			to.Field(i).Set(from.Field(i))
		}
	}
	if !r.Config.Runs(1) {
		r.prevProfiles = prev.Profiles
	}
	return nil
}
