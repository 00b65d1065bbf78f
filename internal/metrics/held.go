package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Names of the series HeldNodes serves, for alerts, dashboards and tests.
const (
	NameNodesHeld          = "kubefledged_nodes_held"
	NameNodeHeldSince      = "kubefledged_node_held_since_timestamp_seconds"
	NameHeldNodesWaitingOn = "kubefledged_held_nodes_waiting_for_image"
)

// HeldNode is a node that carries the startup taint, as a scrape finds it.
type HeldNode struct {
	Name string
	// Created is when the node was created: its hold, and the timeout,
	// count from then.
	Created time.Time
	// Waiting are the images not cached on it yet, as far as this replica
	// knows: only the leader runs operations, the others know none.
	Waiting []string
}

// HeldNodes reports the nodes the startup taint holds, found at scrape time
// from the taint itself: nothing is kept between scrapes, so the series are
// right after a restart and a released or deleted node leaves none behind.
// They are bounded by the held nodes, and the images of the caches that
// select them.
type HeldNodes struct {
	list source[func(context.Context) ([]HeldNode, error)]

	count, since, waiting *prometheus.Desc
}

var heldCollector = &HeldNodes{
	count: prometheus.NewDesc(NameNodesHeld,
		"Nodes that carry the startup taint now, waiting for their images.", nil, nil),
	since: prometheus.NewDesc(NameNodeHeldSince,
		"Creation time of each node the startup taint holds now (the hold and its timeout count from it).", []string{"node"}, nil),
	waiting: prometheus.NewDesc(NameHeldNodesWaitingOn,
		"Nodes the startup taint holds now on which the image is not cached yet (pending or failed), on the leader.", []string{"image"}, nil),
}

var heldOnce sync.Once

// RegisterHeldNodes serves the held nodes that list finds, when the startup
// taint is on (list not nil). The collector is registered once per process;
// a later call (tests start several controllers in turn, with the taint and
// without) replaces list, and with nil it serves nothing.
func RegisterHeldNodes(list func(context.Context) ([]HeldNode, error)) {
	heldCollector.list.set(list)
	if list != nil {
		heldOnce.Do(func() { crmetrics.Registry.MustRegister(heldCollector) })
	}
}

// Describe implements prometheus.Collector.
func (c *HeldNodes) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.count
	ch <- c.since
	ch <- c.waiting
}

// Collect implements prometheus.Collector.
func (c *HeldNodes) Collect(ch chan<- prometheus.Metric) {
	list := c.list.get()
	if list == nil {
		return
	}
	nodes, err := list(context.Background())
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.count, prometheus.GaugeValue, float64(len(nodes)))
	waiting := map[string]int{}
	for _, n := range nodes {
		ch <- prometheus.MustNewConstMetric(c.since, prometheus.GaugeValue, float64(n.Created.Unix()), n.Name)
		for _, img := range n.Waiting {
			waiting[img]++
		}
	}
	for img, k := range waiting {
		ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(k), img)
	}
}
