package metrics

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
)

// Labels of the per-cache series. They are not "namespace" and "name":
// Prometheus attaches the scraped target's own namespace (the controller's)
// as "namespace", and a series label of that name would be renamed
// exported_namespace by every default scrape configuration.
const (
	LabelCacheNamespace = "imagecache_namespace"
	LabelCache          = "imagecache"
)

// Names of the series Caches serves, for the chart's alerts and dashboard
// and their tests.
const (
	NameCachesByStatus = "kubefledged_imagecaches"
	NameCacheStatus    = "kubefledged_imagecache_status"
	NameCachePairs     = "kubefledged_imagecache_pairs"
	NameImageFailures  = "kubefledged_imagecache_image_failures"
	NameFailingSince   = "kubefledged_imagecache_failing_since_timestamp_seconds"
)

// Caches reports the ImageCaches as their status stands, read from the
// informer cache at scrape time: nothing is kept between scrapes, so a
// deleted cache, or a failure that is gone, leaves no series behind. Each
// series is bounded by what the API holds: one per cache, one per (cache,
// state) for the counts, and at most v1alpha2's failure bound per cache for
// the failing images.
type Caches struct {
	reader source[client.Reader]

	byStatus, status, pairs, imageFailures, failingSince *prometheus.Desc
}

// newCaches makes the collector with its descriptions.
func newCaches() *Caches {
	perCache := []string{LabelCacheNamespace, LabelCache}
	return &Caches{
		byStatus: prometheus.NewDesc(NameCachesByStatus,
			"ImageCaches by status of their latest operation.", []string{"status"}, nil),
		status: prometheus.NewDesc(NameCacheStatus,
			"1 for each ImageCache, labelled with the status of its latest operation (Pending before the first).",
			append(perCache, "status"), nil),
		pairs: prometheus.NewDesc(NameCachePairs,
			"(image, node) pairs of each ImageCache's latest operation, by state, as status.counts: desired, succeeded, already_present, failed, skipped, in_flight, waiting.",
			append(perCache, "state"), nil),
		imageFailures: prometheus.NewDesc(NameImageFailures,
			"Nodes an image failed on in its ImageCache's latest operation, as status.failures lists them (bounded; see failuresOmitted).",
			append(perCache, "image"), nil),
		failingSince: prometheus.NewDesc(NameFailingSince,
			"When the ImageCache's Ready condition turned False, for a cache whose latest operation Failed or was Aborted; absent otherwise.",
			perCache, nil),
	}
}

var cachesCollector = newCaches()

var registerOnce sync.Once

// RegisterCaches serves the per-cache series from r (the manager's cached
// client). The collector is registered once per process; a later call
// (tests start several controllers in turn) replaces the reader.
func RegisterCaches(r client.Reader) {
	cachesCollector.reader.set(r)
	registerOnce.Do(func() { crmetrics.Registry.MustRegister(cachesCollector) })
}

// Describe implements prometheus.Collector.
func (c *Caches) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.byStatus, c.status, c.pairs, c.imageFailures, c.failingSince} {
		ch <- d
	}
}

// statuses always reported by kubefledged_imagecaches, at 0 when no cache
// has them, so that a panel or rule reads 0 rather than no data.
var statuses = []v1alpha2.ImageCacheActionStatus{
	v1alpha2.ImageCacheActionStatusProcessing, v1alpha2.ImageCacheActionStatusSucceeded,
	v1alpha2.ImageCacheActionStatusFailed, v1alpha2.ImageCacheActionStatusAborted,
	v1alpha2.ImageCacheActionStatusNoImagesPulledOrDeleted,
}

// Collect implements prometheus.Collector.
func (c *Caches) Collect(ch chan<- prometheus.Metric) {
	r := c.reader.get()
	if r == nil {
		return
	}
	list := &v1alpha2.ImageCacheList{}
	// Read only: the statuses may hold hundreds of failures and a copy of a
	// large spec, which a deep copy per scrape would duplicate for nothing.
	if err := r.List(context.Background(), list, client.UnsafeDisableDeepCopy); err != nil {
		return
	}
	counts := map[string]int{}
	for _, s := range statuses {
		counts[string(s)] = 0
	}
	for i := range list.Items {
		ic := &list.Items[i]
		status := statusOf(ic)
		counts[status]++
		c.collectCache(ch, ic, status)
	}
	for s, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.byStatus, prometheus.GaugeValue, float64(n), s)
	}
}

// statusOf is the cache's status, Pending before the controller wrote any.
func statusOf(ic *v1alpha2.ImageCache) string {
	if ic.Status.Status == "" {
		return "Pending"
	}
	return string(ic.Status.Status)
}

func (c *Caches) collectCache(ch chan<- prometheus.Metric, ic *v1alpha2.ImageCache, status string) {
	ns, name := ic.Namespace, ic.Name
	ch <- prometheus.MustNewConstMetric(c.status, prometheus.GaugeValue, 1, ns, name, status)
	if n := ic.Status.Counts; n != nil {
		for _, p := range []struct {
			state string
			v     int32
		}{
			{"desired", n.Desired}, {"succeeded", n.Succeeded}, {"already_present", n.AlreadyPresent},
			{"failed", n.Failed}, {"skipped", n.Skipped}, {"in_flight", n.InFlight}, {"waiting", n.Waiting},
		} {
			ch <- prometheus.MustNewConstMetric(c.pairs, prometheus.GaugeValue, float64(p.v), ns, name, p.state)
		}
	}
	for image, nodes := range ic.Status.Failures {
		ch <- prometheus.MustNewConstMetric(c.imageFailures, prometheus.GaugeValue, float64(len(nodes)), ns, name, image)
	}
	if since, ok := FailingSince(ic.Status.Conditions); ok {
		ch <- prometheus.MustNewConstMetric(c.failingSince, prometheus.GaugeValue, float64(since.Unix()), ns, name)
	}
}

// FailingSince is when a cache's images stopped being all in place: the
// last transition of its Ready condition, when Ready is False because an
// operation Failed or was Aborted. Ready keeps its state while an
// operation runs, so a failed cache that is being refreshed stays failing
// from the same time, and an alert on the time since sees the refresh that
// did not help. A cache whose first operation is still running has no
// result yet and is not failing.
func FailingSince(conds []metav1.Condition) (metav1.Time, bool) {
	ready := meta.FindStatusCondition(conds, v1alpha2.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionFalse {
		return metav1.Time{}, false
	}
	switch v1alpha2.ImageCacheActionStatus(ready.Reason) {
	case v1alpha2.ImageCacheActionStatusFailed, v1alpha2.ImageCacheActionStatusAborted:
		return ready.LastTransitionTime, true
	}
	return metav1.Time{}, false
}
