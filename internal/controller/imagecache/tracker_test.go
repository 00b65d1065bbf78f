package imagecache

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
)

// Settling reads only the Jobs the tracker says changed; a change lost here
// would leave a finished Job unread until its deadline.
func TestTrackerChangedJobs(t *testing.T) {
	a := types.NamespacedName{Namespace: "ns1", Name: "c"}
	b := types.NamespacedName{Namespace: "ns2", Name: "c"}
	tests := []struct {
		name  string
		steps func(tr *tracker)
		want  map[types.NamespacedName]map[string]bool
	}{
		{"events of a running operation are kept per cache", func(tr *tracker) {
			tr.put(a, &operation{})
			tr.put(b, &operation{})
			tr.jobChanged(a, "j1")
			tr.jobChanged(a, "j1")
			tr.jobChanged(b, "j2")
		}, map[types.NamespacedName]map[string]bool{a: {"j1": true}, b: {"j2": true}}},
		{"a cache with no running operation keeps nothing", func(tr *tracker) {
			tr.jobChanged(a, "j1")
		}, map[types.NamespacedName]map[string]bool{a: nil}},
		{"an operation that ends drops its changes", func(tr *tracker) {
			tr.put(a, &operation{})
			tr.jobChanged(a, "j1")
			tr.drop(a)
		}, map[types.NamespacedName]map[string]bool{a: nil}},
		{"a forgotten cache drops its changes", func(tr *tracker) {
			tr.put(a, &operation{})
			tr.jobChanged(a, "j1")
			tr.forget(a)
		}, map[types.NamespacedName]map[string]bool{a: nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			tr := newTracker(nil)
			tt.steps(tr)
			for k, want := range tt.want {
				g.Expect(tr.takeChanged(k)).To(Equal(want), "%s", k)
			}
		})
	}
}

// A change noted after a take is seen by the next take, never lost between.
func TestTrackerTakeThenChange(t *testing.T) {
	g := NewWithT(t)
	a := types.NamespacedName{Namespace: "ns", Name: "c"}
	tr := newTracker(nil)
	tr.put(a, &operation{})
	tr.jobChanged(a, "j1")
	g.Expect(tr.takeChanged(a)).To(Equal(map[string]bool{"j1": true}))
	g.Expect(tr.takeChanged(a)).To(BeNil())
	tr.jobChanged(a, "j1")
	g.Expect(tr.takeChanged(a)).To(Equal(map[string]bool{"j1": true}))
}

// A node event reaches a running operation once, and no cache without one.
func TestTrackerNodesChanged(t *testing.T) {
	g := NewWithT(t)
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	b := types.NamespacedName{Namespace: "ns", Name: "b"}
	tr := newTracker(nil)
	tr.put(a, &operation{})
	tr.nodeChanged(a)
	tr.nodeChanged(b)
	g.Expect(tr.takeNodesChanged(a)).To(BeTrue())
	g.Expect(tr.takeNodesChanged(a)).To(BeFalse())
	g.Expect(tr.takeNodesChanged(b)).To(BeFalse())
	tr.nodeChanged(a)
	tr.drop(a)
	g.Expect(tr.takeNodesChanged(a)).To(BeFalse())
}
