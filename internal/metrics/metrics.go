// Package metrics defines the controller's domain metrics (#117), served on
// the controller-runtime metrics endpoint beside its defaults (reconcile
// counts and durations, work queue depth, client-go requests).
package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
)

var (
	// JobsCreated counts Jobs created, by kind (pull, delete).
	JobsCreated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubefledged_jobs_created_total",
		Help: "Jobs created, by kind (pull or delete).",
	}, []string{"kind"})
	// JobsFinished counts Jobs settled, by kind and result (succeeded,
	// failed, expired: still unfinished at the deadline).
	JobsFinished = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubefledged_jobs_finished_total",
		Help: "Jobs settled, by kind and result (succeeded, failed, expired).",
	}, []string{"kind", "result"})
	// ImagePulls counts (image, node) pulls by result: succeeded, failed,
	// or already_present (no Job needed).
	ImagePulls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubefledged_image_pulls_total",
		Help: "Image pulls onto nodes, by result (succeeded, failed, already_present).",
	}, []string{"result"})
	// OperationDuration observes operations from start to final status.
	OperationDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "kubefledged_operation_duration_seconds",
		Help:    "Duration of ImageCache operations, by operation and final status.",
		Buckets: []float64{1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600},
	}, []string{"operation", "result"})
	// JobsInFlight is the number of Jobs holding a pacing slot.
	JobsInFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kubefledged_jobs_in_flight",
		Help: "Jobs created and not yet settled, across all caches.",
	})
)

func init() {
	crmetrics.Registry.MustRegister(JobsCreated, JobsFinished, ImagePulls, OperationDuration, JobsInFlight)
}

// CachesByStatus reports the number of ImageCaches in each status, read
// from the informer cache at scrape time, so it is never stale or leaked.
type CachesByStatus struct {
	Reader client.Reader
	desc   *prometheus.Desc
}

// RegisterCachesByStatus registers the collector once per process; a second
// registration (tests start several controllers) replaces the reader.
func RegisterCachesByStatus(r client.Reader) {
	cachesCollector.Reader = r
	registerOnce()
}

var cachesCollector = &CachesByStatus{desc: prometheus.NewDesc("kubefledged_imagecaches",
	"ImageCaches by status of their latest operation.", []string{"status"}, nil)}

var registered bool

func registerOnce() {
	if !registered {
		crmetrics.Registry.MustRegister(cachesCollector)
		registered = true
	}
}

// Describe implements prometheus.Collector.
func (c *CachesByStatus) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *CachesByStatus) Collect(ch chan<- prometheus.Metric) {
	if c.Reader == nil {
		return
	}
	list := &v1alpha2.ImageCacheList{}
	if err := c.Reader.List(context.Background(), list); err != nil {
		return
	}
	counts := map[string]int{}
	for _, s := range []v1alpha2.ImageCacheActionStatus{v1alpha2.ImageCacheActionStatusProcessing, v1alpha2.ImageCacheActionStatusSucceeded,
		v1alpha2.ImageCacheActionStatusFailed, v1alpha2.ImageCacheActionStatusAborted, v1alpha2.ImageCacheActionStatusNoImagesPulledOrDeleted} {
		counts[string(s)] = 0
	}
	for _, ic := range list.Items {
		s := string(ic.Status.Status)
		if s == "" {
			s = "Pending"
		}
		counts[s]++
	}
	for s, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), s)
	}
}
