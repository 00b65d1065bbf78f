// Package metrics defines the controller's domain metrics (#117), served on
// the controller-runtime metrics endpoint beside its defaults (reconcile
// counts and durations, work queue depth, client-go requests, and
// leader_election_master_status when leader election is on).
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
)

// The counters carry no image or cache label on purpose: a counter's series
// live as long as the process, and image references change with every new
// tag, so a per-image counter would grow without bound. What is per cache
// or per image is read from the caches' status at scrape time (caches.go),
// where it goes away with the cache or the failure.
var (
	// JobsCreated counts Jobs created, by kind (pull, delete).
	JobsCreated = counterVec("kubefledged_jobs_created_total",
		"Jobs created, by kind (pull, delete, pin or unpin).", "kind")
	// JobsFinished counts Jobs settled, by kind and result (succeeded,
	// failed, expired: still unfinished at the deadline).
	JobsFinished = counterVec("kubefledged_jobs_finished_total",
		"Jobs settled, by kind and result (succeeded, failed, expired).", "kind", "result")
	// ImagePulls counts (image, node) pulls by result: succeeded, failed,
	// or already_present (no Job needed).
	ImagePulls = counterVec("kubefledged_image_pulls_total",
		"Image pulls onto nodes, by result (succeeded, failed, already_present).", "result")
	// OperationDuration observes operations from start to final status.
	OperationDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "kubefledged_operation_duration_seconds",
		Help:    "Duration of ImageCache operations, by operation and final status.",
		Buckets: []float64{1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600},
	}, []string{"operation", "result"})
	// JobsInFlight is the pacing slots held: one per Job in flight, but a
	// node Job on a node labelled for parallel pulls holds one per pull it
	// may run at once.
	JobsInFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kubefledged_jobs_in_flight",
		Help: "Jobs created and not yet settled, across all caches.",
	})
	// JobsWindow is the cap on JobsInFlight now: --max-concurrent-jobs, or
	// less while the Job controller starts Jobs later than
	// --max-job-start-delay (pacing.Window).
	JobsWindow = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kubefledged_jobs_window",
		Help: "The most Jobs let in flight now: --max-concurrent-jobs, or fewer while the cluster's Job controller starts Jobs later than --max-job-start-delay.",
	})
	// NodeHoldSeconds observes, for each node released from the startup
	// taint, the time from its creation to the release, by why it was
	// released (cached, failed, no_cache, timeout): what the taint cost
	// in capacity, and how often the timeout had to act.
	NodeHoldSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "kubefledged_node_startup_taint_hold_seconds",
		Help:    "Time from a node's creation to the removal of its startup taint, by reason (cached, failed, no_cache, timeout).",
		Buckets: []float64{1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800},
	}, []string{"reason"})
	// NodeTimeoutImages counts the images that were not cached on nodes
	// released at the timeout. Their names are in the node's Event and,
	// while the node was held, in kubefledged_held_nodes_waiting_for_image:
	// a counter's image label would outlive every tag (see above).
	NodeTimeoutImages = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kubefledged_node_startup_taint_timeout_images_total",
		Help: "Images not cached on nodes whose startup taint was removed at the timeout (their names are in the node's StartupTaintTimeout Event).",
	})
)

// counterVec makes a counter with labels; ours need no more than a name and
// help.
func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

func init() {
	crmetrics.Registry.MustRegister(JobsCreated, JobsFinished, ImagePulls, OperationDuration, JobsInFlight,
		JobsWindow, NodeHoldSeconds, NodeTimeoutImages)
	initLabelSets()
}

// initLabelSets creates every series the counters and the histogram can
// have, at 0. rate() and increase() count from a series' first sample: a
// series first scraped at 3 failed pulls shows no failure at all until the
// next one, and the first slow operation of a kind would never reach an
// alert. The sets are small and fixed: 19 counter series, the operation
// histogram's 5 operations times the 3 statuses an operation ends with, and
// the hold histogram's 4 reasons.
func initLabelSets() {
	kinds := []jobs.Kind{jobs.Pull, jobs.Delete, jobs.Pin, jobs.Unpin}
	for _, k := range kinds {
		JobsCreated.WithLabelValues(string(k))
		for _, r := range []string{jobs.ResultSucceeded, jobs.ResultFailed, jobs.ResultExpired} {
			JobsFinished.WithLabelValues(string(k), r)
		}
	}
	for _, r := range []string{"succeeded", "failed", "already_present"} {
		ImagePulls.WithLabelValues(r)
	}
	for _, op := range []string{v1alpha2.ImageCacheReasonImageCacheCreate, v1alpha2.ImageCacheReasonImageCacheUpdate,
		v1alpha2.ImageCacheReasonImageCacheRefresh, v1alpha2.ImageCacheReasonImageCachePurge, v1alpha2.ImageCacheReasonImageCacheNewNodes} {
		for _, st := range []v1alpha2.ImageCacheActionStatus{v1alpha2.ImageCacheActionStatusSucceeded, v1alpha2.ImageCacheActionStatusFailed,
			v1alpha2.ImageCacheActionStatusNoImagesPulledOrDeleted} {
			OperationDuration.WithLabelValues(op, string(st))
		}
	}
	for _, reason := range HoldReasons {
		NodeHoldSeconds.WithLabelValues(reason)
	}
}

// HoldReasons are the values of NodeHoldSeconds' reason label: why a node
// was released from the startup taint (the hold package's reasons).
var HoldReasons = []string{"cached", "failed", "no_cache", "timeout"}
