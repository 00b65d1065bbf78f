package jobs

import "iter"

// Pending is a pair that has no Job yet, in the order pairs take slots.
type Pending struct {
	// Pair is the caller's handle on the pair; Layout hands it back in the
	// Jobs it lays out.
	Pair int
	Work Work
}

// Planned is a Job Layout decided on: fixed from here on, since a retried
// create must make the very same Job.
type Planned struct {
	Name string
	Node string
	// Pairs are the handles of its pairs, in the order of its containers.
	Pairs []int
	// NodeJob says that the Job pulls its pairs one container each and is
	// settled container by container (BuildNode), rather than being one
	// pair's own Job (Build). It is said here, once: nothing downstream
	// may tell it from the number of pairs, since a node Job may hold one.
	NodeJob bool
	// Slots are the pacing slots the grant gave it.
	Slots int
}

// Grant asks for the pacing slots of a Job of up to want pairs on node,
// which pulls parallel images at once: it answers how many pairs the Job
// may take (0: none, wait) and the slots they hold (pacing.Limiter.Take).
type Grant func(node string, want, parallel int) (size, slots int)

// Layout puts the pending pairs in Jobs as the grants allow, and says
// whether some had to wait. Per (image, node), and for every delete, a
// pair's Job is its own and asks for one slot, in the pairs' order. Per
// node, a node's pulls are then put in Jobs of at most MaxContainers, node
// by node in the order the nodes first come, each sized by its grant: with
// the kubelet pulling a pod's images one at a time, a Job of all of a
// node's images holds one slot.
func Layout(cacheName, operation string, pending []Pending, g Granularity, grant Grant) ([]Planned, bool) {
	var out []Planned
	waiting := false
	byNode := map[string][]Pending{}
	var nodes []string
	for _, p := range pending {
		node := p.Work.Node.Name
		if g == PerNode && p.Work.Kind == Pull {
			if _, ok := byNode[node]; !ok {
				nodes = append(nodes, node)
			}
			byNode[node] = append(byNode[node], p)
			continue
		}
		size, slots := grant(node, 1, 1)
		if size == 0 {
			waiting = true
			continue
		}
		out = append(out, Planned{Name: Name(cacheName, operation, p.Work), Node: node, Pairs: []int{p.Pair}, Slots: slots})
	}
	for _, node := range nodes {
		var full bool
		out, full = layoutNode(cacheName, operation, out, node, byNode[node], grant)
		waiting = waiting || full
	}
	return out, waiting
}

// layoutNode appends to out the node Jobs of node's pulls ps that the
// grants allow, and says whether some had to wait.
func layoutNode(cacheName, operation string, out []Planned, node string, ps []Pending, grant Grant) ([]Planned, bool) {
	for len(ps) > 0 {
		size, slots := grant(node, min(len(ps), MaxContainers), ps[0].Work.Node.Parallel)
		if size == 0 {
			return out, true
		}
		size = min(size, len(ps))
		ws := make([]Work, size)
		pairs := make([]int, size)
		for k, p := range ps[:size] {
			ws[k], pairs[k] = p.Work, p.Pair
		}
		ps = ps[size:]
		out = append(out, Planned{Name: NodeJobName(cacheName, operation, ws), Node: node, Pairs: pairs, NodeJob: true, Slots: slots})
	}
	return out, false
}

// Chunks cuts pending into runs of at least n pairs (the last may have
// fewer), each ending where a node's pairs end. Laid out one run at a time,
// a node's pulls get the same Jobs as when laid out all at once, as long
// as pending lists each node's pulls together; and the caller can stop at
// a run's end when no slot is left, reading no further.
func Chunks(pending iter.Seq[Pending], n int) iter.Seq[[]Pending] {
	return func(yield func([]Pending) bool) {
		var run []Pending
		for p := range pending {
			if len(run) >= n && p.Work.Node.Name != run[len(run)-1].Work.Node.Name {
				if !yield(run) {
					return
				}
				run = nil
			}
			run = append(run, p)
		}
		if len(run) > 0 {
			yield(run)
		}
	}
}
