package jobs

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
)

// grants is a scripted Grant: it answers each ask with the next size (its
// slots are the size) and records the asks, so a test sees the order in
// which Jobs take slots as well as what they take.
type grants struct {
	sizes []int
	asks  []string
}

func (g *grants) grant(node string, want, parallel int) (int, int) {
	g.asks = append(g.asks, fmt.Sprintf("%s:%d/%d", node, want, parallel))
	if len(g.sizes) == 0 {
		return want, want
	}
	n := min(g.sizes[0], want)
	g.sizes = g.sizes[1:]
	return n, n
}

func TestLayout(t *testing.T) {
	on := func(kind Kind, image, node string) Work {
		w := work(kind, image, "")
		w.Node.Name = node
		return w
	}
	many := func(n int, node string) []Work {
		out := make([]Work, n)
		for i := range out {
			out[i] = on(Pull, fmt.Sprintf("img%d:1", i), node)
		}
		return out
	}
	type job struct {
		pairs   []int
		nodeJob bool
		slots   int
	}
	cases := []struct {
		name        string
		work        []Work
		g           Granularity
		sizes       []int
		want        []job
		wantWaiting bool
		wantAsks    []string
	}{
		{name: "per image, a Job and a slot per pair, in order",
			work: []Work{on(Pull, "a:1", "n1"), on(Pull, "b:1", "n2")}, g: PerImage,
			want: []job{{[]int{0}, false, 1}, {[]int{1}, false, 1}}, wantAsks: []string{"n1:1/1", "n2:1/1"}},
		{name: "per image, a pair refused waits and the next still asks",
			work: []Work{on(Pull, "a:1", "n1"), on(Pull, "b:1", "n2")}, g: PerImage, sizes: []int{0, 1},
			want: []job{{[]int{1}, false, 1}}, wantWaiting: true},
		{name: "per node, a node's pulls in one Job, nodes in the order they first come",
			work: []Work{on(Pull, "a:1", "n2"), on(Pull, "a:1", "n1"), on(Pull, "b:1", "n2")}, g: PerNode,
			want: []job{{[]int{0, 2}, true, 2}, {[]int{1}, true, 1}}, wantAsks: []string{"n2:2/0", "n1:1/0"}},
		{name: "per node, a delete is its own Job and asks first",
			work: []Work{on(Pull, "a:1", "n1"), on(Delete, "b:1", "n1")}, g: PerNode,
			want: []job{{[]int{1}, false, 1}, {[]int{0}, true, 1}}, wantAsks: []string{"n1:1/1", "n1:1/0"}},
		{name: "per node, at most MaxContainers a Job",
			work: many(MaxContainers+1, "n1"), g: PerNode,
			want: []job{{seq(0, MaxContainers), true, MaxContainers}, {[]int{MaxContainers}, true, 1}}},
		{name: "per node, a grant smaller than asked sizes the Job, and a refused one stops the node",
			work: many(5, "n1"), g: PerNode, sizes: []int{2, 0},
			want: []job{{[]int{0, 1}, true, 2}}, wantWaiting: true, wantAsks: []string{"n1:5/0", "n1:3/0"}},
		{name: "nothing pending, nothing asked",
			g: PerNode},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			pending := make([]Pending, len(tt.work))
			for i, w := range tt.work {
				pending[i] = Pending{Pair: i, Work: w}
			}
			gr := &grants{sizes: tt.sizes}
			got, waiting := Layout("c", "op1", pending, tt.g, gr.grant)
			g.Expect(waiting).To(Equal(tt.wantWaiting))
			g.Expect(got).To(HaveLen(len(tt.want)))
			for k, j := range tt.want {
				g.Expect(got[k].Pairs).To(Equal(j.pairs), "job %d", k)
				g.Expect(got[k].NodeJob).To(Equal(j.nodeJob), "job %d", k)
				g.Expect(got[k].Slots).To(Equal(j.slots), "job %d", k)
				ws := make([]Work, len(j.pairs))
				for c, i := range j.pairs {
					ws[c] = tt.work[i]
				}
				g.Expect(got[k].Node).To(Equal(ws[0].Node.Name), "job %d", k)
				wantName := Name("c", "op1", ws[0])
				if j.nodeJob {
					wantName = NodeJobName("c", "op1", ws)
				}
				g.Expect(got[k].Name).To(Equal(wantName), "job %d", k)
			}
			if tt.wantAsks != nil {
				g.Expect(gr.asks).To(Equal(tt.wantAsks))
			}
		})
	}
}

func seq(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// Chunks ends a run only where a node's pairs end, once it holds n pairs,
// and reads no further than the runs taken: a take that stops after its
// first run has read that run and the pair that ended it.
func TestChunks(t *testing.T) {
	g := NewWithT(t)
	var pending []Pending
	for k, node := range []string{"n1", "n1", "n1", "n2", "n3", "n3", "n4"} {
		w := work(Pull, fmt.Sprintf("img%d:1", k), "")
		w.Node.Name = node
		pending = append(pending, Pending{Pair: k, Work: w})
	}
	read := 0
	seq := func(yield func(Pending) bool) {
		for _, p := range pending {
			read++
			if !yield(p) {
				return
			}
		}
	}
	pairs := func(run []Pending) []int {
		var out []int
		for _, p := range run {
			out = append(out, p.Pair)
		}
		return out
	}
	var runs [][]int
	for run := range Chunks(seq, 2) {
		runs = append(runs, pairs(run))
	}
	g.Expect(runs).To(Equal([][]int{{0, 1, 2}, {3, 4, 5}, {6}}), "runs of at least 2, a node's pairs never split")
	g.Expect(read).To(Equal(7))

	read = 0
	for run := range Chunks(seq, 2) {
		g.Expect(pairs(run)).To(Equal([]int{0, 1, 2}))
		break
	}
	g.Expect(read).To(Equal(4), "the first run, and the pair that ended it")

	for range Chunks(func(func(Pending) bool) {}, 2) {
		t.Fatal("nothing pending, no run")
	}
}
