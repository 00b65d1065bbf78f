package metrics

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// HeldNodes reports how many nodes carry the startup taint now, counted in
// the informer cache at scrape time: the taint itself is the record, so the
// figure is right after a restart too and never leaks a node that went.
type HeldNodes struct {
	Reader client.Reader
	Held   func(*corev1.Node) bool
	desc   *prometheus.Desc
}

var heldCollector = &HeldNodes{desc: prometheus.NewDesc("kubefledged_nodes_held",
	"Nodes that carry the startup taint now, waiting for their images.", nil, nil)}

var (
	heldMu         sync.Mutex
	heldRegistered bool
)

// RegisterHeldNodes registers the collector once per process, when the
// startup taint is on (held not nil); a second call (tests start several
// controllers, with the taint and without) replaces what it reads, and with
// nil it reports nothing.
func RegisterHeldNodes(r client.Reader, held func(*corev1.Node) bool) {
	heldMu.Lock()
	defer heldMu.Unlock()
	heldCollector.Reader, heldCollector.Held = r, held
	if held != nil && !heldRegistered {
		crmetrics.Registry.MustRegister(heldCollector)
		heldRegistered = true
	}
}

// Describe implements prometheus.Collector.
func (c *HeldNodes) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *HeldNodes) Collect(ch chan<- prometheus.Metric) {
	heldMu.Lock()
	reader, held := c.Reader, c.Held
	heldMu.Unlock()
	if reader == nil || held == nil {
		return
	}
	nodes := &corev1.NodeList{}
	if err := reader.List(context.Background(), nodes, client.UnsafeDisableDeepCopy); err != nil {
		return
	}
	n := 0
	for i := range nodes.Items {
		if held(&nodes.Items[i]) {
			n++
		}
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n))
}
