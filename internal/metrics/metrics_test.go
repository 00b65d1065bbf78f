package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Every series exists from the start, at 0, so that the first pull failure
// or slow operation is an increase that rate() sees.
func TestLabelSetsExistAtZero(t *testing.T) {
	for _, tt := range []struct {
		name string
		c    prometheus.Collector
		n    int
	}{
		{"kubefledged_jobs_created_total", JobsCreated, 2},
		{"kubefledged_jobs_finished_total", JobsFinished, 6},
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
