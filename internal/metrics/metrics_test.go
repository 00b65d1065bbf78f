package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Every series exists from the start, at 0, so that the first pull failure
// or slow operation is an increase that rate() sees.
func TestLabelSetsExistAtZero(t *testing.T) {
	for _, tt := range []struct {
		name string
		c    prometheus.Collector
		n    int
	}{
		{"kubefledged_jobs_created_total", JobsCreated, 4},
		{"kubefledged_jobs_finished_total", JobsFinished, 12},
		{"kubefledged_image_pulls_total", ImagePulls, 3},
		{"kubefledged_operation_duration_seconds", OperationDuration, 15},
		{"kubefledged_node_startup_taint_hold_seconds", NodeHoldSeconds, 4},
	} {
		if got := testutil.CollectAndCount(tt.c, tt.name); got != tt.n {
			t.Errorf("%s: %d series, want %d", tt.name, got, tt.n)
		}
	}
	if v := testutil.ToFloat64(ImagePulls.WithLabelValues("failed")); v != 0 {
		t.Errorf("failed pulls start at %v", v)
	}
}

func TestBuildInfo(t *testing.T) {
	RegisterBuildInfo("v1.2.3", "abc123")
	RegisterBuildInfo("v9", "other") // once per process: the first stays
	mfs, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != NameBuildInfo {
			continue
		}
		if len(mf.Metric) != 1 {
			t.Fatalf("%d series of %s", len(mf.Metric), NameBuildInfo)
		}
		got := map[string]string{}
		for _, l := range mf.Metric[0].Label {
			got[l.GetName()] = l.GetValue()
		}
		if got["version"] != "v1.2.3" || got["revision"] != "abc123" || mf.Metric[0].Gauge.GetValue() != 1 {
			t.Errorf("%s: %v = %v", NameBuildInfo, got, mf.Metric[0].Gauge.GetValue())
		}
		return
	}
	t.Errorf("%s is not served", NameBuildInfo)
}

func TestRevisionFallsBack(t *testing.T) {
	if got := Revision("given"); got != "given" {
		t.Errorf("Revision(given) = %q", got)
	}
	// A test binary carries no VCS stamp.
	if got := Revision(""); got == "" {
		t.Error("Revision(\"\") is empty")
	}
}
