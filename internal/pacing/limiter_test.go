package pacing

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
)

var a, b = types.NamespacedName{Name: "a"}, types.NamespacedName{Name: "b"}

// take is one Take of a test, and what it must give.
type take struct {
	owner                   types.NamespacedName
	node                    string
	pending, parallel       int
	wantSize, wantSlots     int
	release                 bool // instead: Release wantSlots of owner on node
	forget                  bool // instead: Forget owner
	wantInFlight, wantWoken int
}

func TestSize(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		pending, parallel, free int
		wantSize, wantSlots     int
	}{
		{"a serial node's Job of ten images holds one slot", 10, 1, 2, 10, 1},
		{"parallel 0 counts as 1", 10, 0, 1, 10, 1},
		{"a Job per image", 1, 1, 5, 1, 1},
		{"nothing free", 10, 1, 0, 0, 0},
		{"nothing pending", 0, 1, 5, 0, 0},
		{"a parallel node's Job holds a slot per pull it may run at once", 10, 4, 8, 10, 4},
		{"a small Job on a parallel node holds a slot per image", 3, 4, 8, 3, 3},
		{"a parallel node with less free shrinks the Job to what is free", 10, 4, 2, 2, 2},
		{"an unknown parallelism counts every pull (as per image)", 10, Unbounded, 2, 2, 2},
		{"an unknown parallelism, all free", 10, Unbounded, 100, 10, 10},
		{"no caps", 32, 1, int(^uint(0) >> 1), 32, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			size, slots := Size(tc.pending, tc.parallel, tc.free)
			g.Expect([]int{size, slots}).To(Equal([]int{tc.wantSize, tc.wantSlots}))
		})
	}
}

func TestTake(t *testing.T) {
	for _, tc := range []struct {
		name         string
		max, perNode int
		steps        []take
	}{{
		name: "default caps: a node gets one Job of all its images, and up to 2 such Jobs",
		max:  100, perNode: 2,
		steps: []take{
			{owner: a, node: "n1", pending: 10, parallel: 1, wantSize: 10, wantSlots: 1, wantInFlight: 1},
			{owner: a, node: "n1", pending: 32, parallel: 1, wantSize: 32, wantSlots: 1, wantInFlight: 2},
			{owner: a, node: "n1", pending: 5, parallel: 1, wantInFlight: 2},
			{owner: a, node: "n2", pending: 10, parallel: 1, wantSize: 10, wantSlots: 1, wantInFlight: 3},
		},
	}, {
		name: "per image: one slot per Job, the per-node cap holds",
		max:  4, perNode: 2,
		steps: []take{
			{owner: a, node: "n1", pending: 1, parallel: 1, wantSize: 1, wantSlots: 1, wantInFlight: 1},
			{owner: a, node: "n1", pending: 1, parallel: 1, wantSize: 1, wantSlots: 1, wantInFlight: 2},
			{owner: a, node: "n1", pending: 1, parallel: 1, wantInFlight: 2},
			{owner: a, node: "n2", pending: 1, parallel: 1, wantSize: 1, wantSlots: 1, wantInFlight: 3},
			{owner: a, node: "n3", pending: 1, parallel: 1, wantSize: 1, wantSlots: 1, wantInFlight: 4},
			{owner: a, node: "n4", pending: 1, parallel: 1, wantInFlight: 4},
		},
	}, {
		name: "a node labelled parallel: its Job counts its pulls, within the per-node cap",
		max:  100, perNode: 3,
		steps: []take{
			{owner: a, node: "n1", pending: 10, parallel: 2, wantSize: 10, wantSlots: 2, wantInFlight: 2},
			{owner: a, node: "n1", pending: 10, parallel: 2, wantSize: 1, wantSlots: 1, wantInFlight: 3},
			{owner: a, node: "n1", pending: 9, parallel: 2, wantInFlight: 3},
		},
	}, {
		name: "the global cap counts slots, not images",
		max:  2, perNode: 0,
		steps: []take{
			{owner: a, node: "n1", pending: 10, parallel: 1, wantSize: 10, wantSlots: 1, wantInFlight: 1},
			{owner: a, node: "n2", pending: 10, parallel: 4, wantSize: 1, wantSlots: 1, wantInFlight: 2},
			{owner: a, node: "n3", pending: 10, parallel: 1, wantInFlight: 2},
			{owner: a, node: "n1", release: true, wantSlots: 1, wantInFlight: 1},
			{owner: a, node: "n3", pending: 10, parallel: 1, wantSize: 10, wantSlots: 1, wantInFlight: 2},
		},
	}, {
		name: "no caps",
		steps: []take{
			{owner: a, node: "n1", pending: 32, parallel: 1, wantSize: 32, wantSlots: 1, wantInFlight: 1},
			{owner: a, node: "n1", pending: 32, parallel: Unbounded, wantSize: 32, wantSlots: 32, wantInFlight: 33},
		},
	}, {
		name: "a waiting owner is woken by a release, and then gets its fair share",
		max:  4, perNode: 0,
		steps: []take{
			{owner: a, node: "n1", pending: 1, parallel: 1, wantSize: 1, wantSlots: 1, wantInFlight: 1},
			{owner: a, node: "n2", pending: 1, parallel: 1, wantSize: 1, wantSlots: 1, wantInFlight: 2},
			{owner: a, node: "n3", pending: 1, parallel: 1, wantSize: 1, wantSlots: 1, wantInFlight: 3},
			{owner: a, node: "n4", pending: 1, parallel: 1, wantSize: 1, wantSlots: 1, wantInFlight: 4},
			{owner: b, node: "n5", pending: 1, parallel: 1, wantInFlight: 4},
			{owner: a, node: "n1", release: true, wantSlots: 1, wantInFlight: 3, wantWoken: 1},
			// the share is 2 each now: a, holding 3, may not take more; b may
			{owner: a, node: "n6", pending: 1, parallel: 1, wantInFlight: 3, wantWoken: 1},
			{owner: b, node: "n5", pending: 1, parallel: 1, wantSize: 1, wantSlots: 1, wantInFlight: 4, wantWoken: 1},
			// releasing what an owner does not hold changes nothing
			{owner: types.NamespacedName{Name: "c"}, node: "n9", release: true, wantSlots: 1, wantInFlight: 4, wantWoken: 3},
		},
	}, {
		name: "a small cache arriving while a large one holds the cap takes the slots freed, until it has all it wants",
		max:  4, perNode: 2,
		steps: []take{
			{owner: a, node: "n1", pending: 10, parallel: 1, wantSize: 10, wantSlots: 1, wantInFlight: 1},
			{owner: a, node: "n2", pending: 10, parallel: 1, wantSize: 10, wantSlots: 1, wantInFlight: 2},
			{owner: a, node: "n3", pending: 10, parallel: 1, wantSize: 10, wantSlots: 1, wantInFlight: 3},
			{owner: a, node: "n4", pending: 10, parallel: 1, wantSize: 10, wantSlots: 1, wantInFlight: 4},
			{owner: a, node: "n5", pending: 10, parallel: 1, wantInFlight: 4},
			// b wants two Jobs, on nodes where a runs one: it waits for the global cap
			{owner: b, node: "n1", pending: 10, parallel: 1, wantInFlight: 4},
			{owner: a, node: "n4", release: true, wantSlots: 1, wantInFlight: 3, wantWoken: 1},
			// a, woken or not, does not take the slot b waits for
			{owner: a, node: "n5", pending: 10, parallel: 1, wantInFlight: 3, wantWoken: 1},
			{owner: b, node: "n1", pending: 10, parallel: 1, wantSize: 10, wantSlots: 1, wantInFlight: 4, wantWoken: 1},
			{owner: a, node: "n3", release: true, wantSlots: 1, wantInFlight: 3, wantWoken: 2},
			{owner: a, node: "n5", pending: 10, parallel: 1, wantInFlight: 3, wantWoken: 2},
			{owner: b, node: "n2", pending: 10, parallel: 1, wantSize: 10, wantSlots: 1, wantInFlight: 4, wantWoken: 2},
			// b has all it wants: its share no longer holds a back
			{owner: b, forget: true, wantInFlight: 4, wantWoken: 2},
			// (an owner's own release does not wake it: its settle goes on to create)
			{owner: a, node: "n2", release: true, wantSlots: 1, wantInFlight: 3, wantWoken: 2},
			{owner: a, node: "n5", pending: 10, parallel: 1, wantSize: 10, wantSlots: 1, wantInFlight: 4, wantWoken: 2},
		},
	}, {
		name: "the share binds only while another owner waits",
		max:  4,
		steps: []take{
			{owner: a, node: "n1", pending: 1, parallel: 1, wantSize: 1, wantSlots: 1, wantInFlight: 1},
			{owner: b, node: "n2", pending: 1, parallel: 1, wantSize: 1, wantSlots: 1, wantInFlight: 2},
			// two owners hold slots, none waits: a may go past half the cap
			{owner: a, node: "n3", pending: 1, parallel: 1, wantSize: 1, wantSlots: 1, wantInFlight: 3},
			{owner: a, node: "n4", pending: 1, parallel: 1, wantSize: 1, wantSlots: 1, wantInFlight: 4},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			woken := 0
			l := New(tc.max, tc.perNode, 0, func(types.NamespacedName) { woken++ })
			for k, s := range tc.steps {
				switch {
				case s.forget:
					l.Forget(s.owner)
				case s.release:
					l.Release(s.owner, s.node, s.wantSlots)
				default:
					size, slots := l.Take(s.owner, s.node, s.pending, s.parallel)
					g.Expect([]int{size, slots}).To(Equal([]int{s.wantSize, s.wantSlots}), "step %d: size, slots", k)
				}
				g.Expect(l.InFlight()).To(Equal(s.wantInFlight), "step %d: in flight", k)
				g.Expect(woken).To(Equal(s.wantWoken), "step %d: owners woken", k)
			}
		})
	}
}

func TestParallelPulls(t *testing.T) {
	for _, tc := range []struct {
		labels  map[string]string
		want    int
		wantErr bool
	}{
		{nil, 1, false},
		{map[string]string{LabelParallelPulls: "1"}, 1, false},
		{map[string]string{LabelParallelPulls: "4"}, 4, false},
		{map[string]string{LabelParallelPulls: "0"}, Unbounded, true},
		{map[string]string{LabelParallelPulls: "-2"}, Unbounded, true},
		{map[string]string{LabelParallelPulls: "many"}, Unbounded, true},
	} {
		g := NewWithT(t)
		n, err := ParallelPulls(tc.labels)
		g.Expect(n).To(Equal(tc.want), "%v", tc.labels)
		if tc.wantErr {
			g.Expect(err).To(MatchError(ContainSubstring("is not a positive integer")), "%v", tc.labels)
		} else {
			g.Expect(err).NotTo(HaveOccurred(), "%v", tc.labels)
		}
	}
}
