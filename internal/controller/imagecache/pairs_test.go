package imagecache

import (
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/results"
)

// The counts a status shows are the table's states: a pair is counted in
// exactly one of them whatever path it took, and the plan's counts of pairs
// it does not run stand beside them.
func TestPairTable(t *testing.T) {
	now := time.Unix(1000, 0)
	ok := results.Outcome{State: results.Succeeded}
	bad := results.Outcome{State: results.Failed, Reason: "ErrImagePull"}
	pull := func(img, node string) jobs.Work {
		return jobs.Work{Kind: jobs.Pull, Image: img, Node: jobs.Node{Name: node}}
	}
	work := []jobs.Work{pull("a", "n2"), pull("b", "n1"), pull("c", "n2")}
	node2 := jobs.Planned{Name: "node-2", Node: "n2", Pairs: []int{0, 2}, NodeJob: true, Slots: 1}
	single := jobs.Planned{Name: "pair-b", Node: "n1", Pairs: []int{1}, Slots: 1}
	tests := []struct {
		name       string
		steps      func(tb *pairTable)
		want       v1alpha2.Counts
		wantStates []pairState
		wantOpen   int
	}{
		{"pairs start waiting", func(*pairTable) {},
			v1alpha2.Counts{Desired: 5, AlreadyPresent: 2, Waiting: 3}, []pairState{waiting, waiting, waiting}, 3},
		{"a Job laid out is not yet in flight", func(tb *pairTable) { tb.lay([]jobs.Planned{node2}) },
			v1alpha2.Counts{Desired: 5, AlreadyPresent: 2, Waiting: 3}, []pairState{waiting, waiting, waiting}, 3},
		{"a created node Job puts all its pairs in flight", func(tb *pairTable) {
			tb.created(tb.lay([]jobs.Planned{node2})[0], now)
		}, v1alpha2.Counts{Desired: 5, AlreadyPresent: 2, Waiting: 1, InFlight: 2}, []pairState{inFlight, waiting, inFlight}, 3},
		{"settled pairs count by outcome", func(tb *pairTable) {
			tb.created(tb.lay([]jobs.Planned{node2})[0], now)
			tb.settle(0, ok)
			tb.settle(2, bad)
		}, v1alpha2.Counts{Desired: 5, AlreadyPresent: 2, Waiting: 1, Succeeded: 1, Failed: 1}, []pairState{succeeded, waiting, failed}, 1},
		{"a create failed for good fails its pair from waiting", func(tb *pairTable) {
			tb.lay([]jobs.Planned{single})
			tb.settle(1, bad)
		}, v1alpha2.Counts{Desired: 5, AlreadyPresent: 2, Waiting: 2, Failed: 1}, []pairState{waiting, failed, waiting}, 2},
		{"pairs that never run count as failed", func(tb *pairTable) {
			tb.unstarted = append(tb.unstarted, results.Item{Image: "bad image", Node: "(all nodes)", Outcome: bad})
		}, v1alpha2.Counts{Desired: 5, AlreadyPresent: 2, Waiting: 3, Failed: 1}, []pairState{waiting, waiting, waiting}, 3},
		{"a running operation's added pairs and counts add up", func(tb *pairTable) {
			tb.addUnrun(1, 2, 1)
			tb.add([]jobs.Work{pull("d", "n3")}, true)
		}, v1alpha2.Counts{Desired: 7, AlreadyPresent: 3, Skipped: 1, Waiting: 4}, []pairState{waiting, waiting, waiting, waiting}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			tb := newPairTable()
			tb.addUnrun(2, 5, 0)
			tb.add(work, true)
			tt.steps(&tb)
			g.Expect(tb.counts()).To(Equal(tt.want))
			g.Expect(tb.open()).To(Equal(tt.wantOpen))
			states := make([]pairState, len(tb.pairs))
			for i := range tb.pairs {
				states[i] = tb.pairs[i].state
			}
			g.Expect(states).To(Equal(tt.wantStates))
		})
	}
}

// Pairs take slots node by node, each node's in the order they came; the
// Jobs to create are the retried ones and new pair Jobs in their pairs'
// order, then the new node Jobs; a Job's slots are its until every pair of
// it is settled.
func TestPairTableJobs(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(1000, 0)
	pull := func(img, node string) jobs.Work {
		return jobs.Work{Kind: jobs.Pull, Image: img, Node: jobs.Node{Name: node}}
	}
	del := pull("x", "n1")
	del.Kind = jobs.Delete
	tb := newPairTable()
	tb.add([]jobs.Work{pull("a", "n2"), pull("b", "n1"), del, pull("c", "n2")}, true)
	g.Expect(tb.order).To(Equal([]int{1, 2, 0, 3}))
	g.Expect(slices.Collect(tb.pending())).To(HaveLen(4))

	// The delete's create is retried; the node Jobs are new.
	retried := tb.lay([]jobs.Planned{{Name: "del", Node: "n1", Pairs: []int{2}, Slots: 1}})[0]
	retried.retry = &createRetry{first: now}
	g.Expect(slices.Collect(tb.pending())).To(Equal([]jobs.Pending{{Pair: 1, Work: tb.pairs[1].work}, {Pair: 0, Work: tb.pairs[0].work}, {Pair: 3, Work: tb.pairs[3].work}}))
	laid := tb.lay([]jobs.Planned{
		{Name: "node-1", Node: "n1", Pairs: []int{1}, NodeJob: true, Slots: 1},
		{Name: "node-2", Node: "n2", Pairs: []int{0, 3}, NodeJob: true, Slots: 1},
	})
	var names []string
	for _, j := range tb.toCreate(laid) {
		names = append(names, j.name)
	}
	g.Expect(names).To(Equal([]string{"del", "node-1", "node-2"}))
	g.Expect(slices.Collect(tb.pending())).To(BeEmpty())

	n2 := tb.jobs["node-2"]
	tb.created(n2, now)
	g.Expect(n2.created).To(Equal(now))
	g.Expect(tb.takeUnseen()).To(Equal([]string{"node-2"}))
	g.Expect(tb.takeUnseen()).To(BeEmpty())
	tb.settle(0, results.Outcome{State: results.Succeeded})
	g.Expect(tb.done(n2)).To(BeFalse(), "a node Job pulls until its last container has finished")
	tb.settle(3, results.Outcome{State: results.Failed})
	g.Expect(tb.done(n2)).To(BeTrue())
}

// pending skips the pairs laid out and those settled without a Job, also
// once added pairs have reordered the table, and gives the rest in order.
func TestPairTablePending(t *testing.T) {
	g := NewWithT(t)
	pull := func(img, node string) jobs.Work {
		return jobs.Work{Kind: jobs.Pull, Image: img, Node: jobs.Node{Name: node}}
	}
	pairsOf := func(tb *pairTable) []int {
		var out []int
		for p := range tb.pending() {
			out = append(out, p.Pair)
		}
		return out
	}
	tb := newPairTable()
	tb.add([]jobs.Work{pull("a", "n3"), pull("a", "n1"), pull("b", "n3"), pull("a", "n2")}, true)
	g.Expect(pairsOf(&tb)).To(Equal([]int{1, 3, 0, 2}))

	tb.lay([]jobs.Planned{{Name: "node-2", Node: "n2", Pairs: []int{3}, NodeJob: true, Slots: 1}})
	tb.settle(1, results.Outcome{State: results.Failed, Reason: "NodeGone"})
	g.Expect(pairsOf(&tb)).To(Equal([]int{0, 2}))
	g.Expect(pairsOf(&tb)).To(Equal([]int{0, 2}), "read twice, the same")

	tb.add([]jobs.Work{pull("a", "n0"), pull("b", "n2")}, true)
	g.Expect(pairsOf(&tb)).To(Equal([]int{4, 5, 0, 2}), "added pairs take their node's place")

	for p := range tb.pending() {
		g.Expect(p.Pair).To(Equal(4))
		break
	}
}
