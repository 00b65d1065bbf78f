package operator

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// NameReleaseCondition is the operator's series of each KubeFledged's
// release conditions, for the operator's alert and its tests.
const NameReleaseCondition = "kubefledged_operator_release_condition"

// ReleaseConditions are the conditions helm-operator-plugins writes on a
// KubeFledged that the series reports: Deployed (the release is installed
// as the spec asks), ReleaseFailed (the last install or upgrade failed) and
// Irreconcilable (the values or the chart could not even be rendered). The
// library serves no metric of its own for them.
var ReleaseConditions = []string{"Deployed", "ReleaseFailed", "Irreconcilable"}

// releaseStatus reports each KubeFledged's release conditions, read from the
// manager's cache at scrape time (the reconciler's informer already holds
// them), so a deleted resource leaves nothing behind.
type releaseStatus struct {
	mu     sync.Mutex
	reader client.Reader
	desc   *prometheus.Desc
}

var releasesCollector = &releaseStatus{desc: prometheus.NewDesc(NameReleaseCondition,
	"1 when the condition of the KubeFledged's Helm release is True, else 0 (Deployed, ReleaseFailed, Irreconcilable).",
	[]string{"kubefledged_namespace", "kubefledged", "condition"}, nil)}

var releasesOnce sync.Once

// registerReleases serves the series from r. The collector is registered
// once per process; a later call (tests start several operators in turn)
// replaces the reader.
func registerReleases(r client.Reader) {
	releasesCollector.mu.Lock()
	releasesCollector.reader = r
	releasesCollector.mu.Unlock()
	releasesOnce.Do(func() { crmetrics.Registry.MustRegister(releasesCollector) })
}

func (r *releaseStatus) Describe(ch chan<- *prometheus.Desc) { ch <- r.desc }

func (r *releaseStatus) Collect(ch chan<- prometheus.Metric) {
	r.mu.Lock()
	reader := r.reader
	r.mu.Unlock()
	if reader == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(KubeFledgedGVK.GroupVersion().WithKind(KubeFledgedGVK.Kind + "List"))
	if err := reader.List(ctx, list); err != nil {
		return
	}
	for _, kf := range list.Items {
		status := releaseConditions(kf)
		for _, c := range ReleaseConditions {
			v := 0.0
			if status[c] == "True" {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(r.desc, prometheus.GaugeValue, v, kf.GetNamespace(), kf.GetName(), c)
		}
	}
}

// releaseConditions maps a KubeFledged's condition types to their status.
func releaseConditions(kf unstructured.Unstructured) map[string]string {
	out := map[string]string{}
	conds, _, _ := unstructured.NestedSlice(kf.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		t, _ := m["type"].(string)
		s, _ := m["status"].(string)
		out[t] = s
	}
	return out
}
