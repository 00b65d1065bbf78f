package metrics

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The held nodes are served as the lister finds them at each scrape, and
// nothing is kept: a node released between two scrapes leaves no series.
func TestHeldNodesSeries(t *testing.T) {
	created := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	nodes := []HeldNode{
		{Name: "n1", Created: created, Waiting: []string{"nginx:1.27", "redis:7"}},
		{Name: "n2", Created: created.Add(time.Minute), Waiting: []string{"redis:7"}},
		{Name: "n3", Created: created.Add(2 * time.Minute)},
	}
	var listErr error
	RegisterHeldNodes(func(context.Context) ([]HeldNode, error) { return nodes, listErr })
	defer RegisterHeldNodes(nil)

	want := `
# HELP kubefledged_held_nodes_waiting_for_image Nodes the startup taint holds now on which the image is not cached yet (pending or failed), on the leader.
# TYPE kubefledged_held_nodes_waiting_for_image gauge
kubefledged_held_nodes_waiting_for_image{image="nginx:1.27"} 1
kubefledged_held_nodes_waiting_for_image{image="redis:7"} 2
# HELP kubefledged_node_held_since_timestamp_seconds Creation time of each node the startup taint holds now (the hold and its timeout count from it).
# TYPE kubefledged_node_held_since_timestamp_seconds gauge
kubefledged_node_held_since_timestamp_seconds{node="n1"} 1.7408304e+09
kubefledged_node_held_since_timestamp_seconds{node="n2"} 1.74083046e+09
kubefledged_node_held_since_timestamp_seconds{node="n3"} 1.74083052e+09
# HELP kubefledged_nodes_held Nodes that carry the startup taint now, waiting for their images.
# TYPE kubefledged_nodes_held gauge
kubefledged_nodes_held 3
`
	if err := testutil.CollectAndCompare(heldCollector, strings.NewReader(want)); err != nil {
		t.Error(err)
	}

	nodes = nodes[2:]
	if got := testutil.CollectAndCount(heldCollector, NameHeldNodesWaitingOn); got != 0 {
		t.Errorf("released nodes left %d waiting series", got)
	}
	if got := testutil.CollectAndCount(heldCollector, NameNodeHeldSince); got != 1 {
		t.Errorf("%d held-since series, want 1", got)
	}

	listErr = errors.New("cache not synced")
	if got := testutil.CollectAndCount(heldCollector); got != 0 {
		t.Errorf("a failed list served %d series", got)
	}
	RegisterHeldNodes(nil)
	if got := testutil.CollectAndCount(heldCollector); got != 0 {
		t.Errorf("with the taint off, %d series", got)
	}
}
