package imagecache

import (
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/results"
)

// pairState is where one (image, node) pair of an operation stands. A pair
// only moves forward: waiting, then in flight once its Job exists, then
// succeeded or failed; or straight from waiting to failed when its Job
// could not be created.
type pairState uint8

const (
	// waiting: no Job yet, for want of a slot or while its create is
	// retried.
	waiting pairState = iota
	inFlight
	succeeded
	failed
	nStates
)

// pair is one (image, node) work item of an operation.
type pair struct {
	work  jobs.Work
	state pairState
	// outcome is the pair's final outcome, once it succeeded or failed.
	outcome results.Outcome
	// job is the Job that does it, from when its slots were taken; nil
	// before. The pair's created time is its Job's.
	job *jobRecord
}

// settled says whether the pair's outcome is final.
func (p *pair) settled() bool { return p.state == succeeded || p.state == failed }

// jobRecord is one Job of the operation, from the moment its slots are
// taken (jobs.Layout) until the operation ends. Its pairs are fixed then, so
// a retried create makes the very same Job.
type jobRecord struct {
	name string
	// pairs are its pairs, in the order of its containers.
	pairs []int
	// nodeJob says it is a node Job: one container per pair, settled
	// container by container, rather than a pair's own Job.
	nodeJob bool
	// slots are the pacing slots it holds while held: from when they were
	// taken until all its pairs are settled.
	slots slots
	held  bool
	// created is when the Job was created (zero before): its deadline
	// counts from there, so a Job held back by pacing does not expire
	// while it waits.
	created time.Time
	// retry is set while its creates fail for a reason that may pass.
	retry *createRetry
}

// slots are the pacing slots one Job holds on its node.
type slots struct {
	node string
	n    int
}

// pairTable is the operation's memory of its work: a state per pair, the
// Jobs that do them, and the counts its status shows, all read from here.
type pairTable struct {
	pairs []pair
	// order is the order in which pairs take their slots.
	order []int
	// pos is where each pair is in order.
	pos []int
	// skip finds the next pair without a Job from a place in order (see
	// nextPending): a take asks for a few slots among up to 50,000 pairs
	// waiting, and walking past every pair already laid out at each one
	// made taking slots the controller's main cost at scale.
	skip []int
	// uncreated are the Jobs laid out and not yet created: the Jobs of the
	// last take, and those whose creates are retried.
	uncreated []*jobRecord
	// jobs are the Jobs laid out so far, by name.
	jobs map[string]*jobRecord
	// unseen are the Jobs created since the last settle: each is looked
	// at once after its creation, whatever its events did meanwhile.
	unseen []string
	// tally counts the pairs in each state.
	tally [nStates]int

	// present, desired and skipped are counts only: the plan says how many
	// pairs were already present, wanted, or left out, never which, so
	// there is no entry for them to be in a state.
	present, desired, skipped int
	// unstarted are items that failed without a Job or a pair (an invalid
	// image, a node whose runtime we cannot reach), failed from the start.
	unstarted []results.Item
}

func newPairTable() pairTable { return pairTable{jobs: map[string]*jobRecord{}} }

// add adds pairs of work, waiting. byNode orders them node by node among
// the pairs waiting for slots, so that the slots put each node's pairs in
// as few Jobs as the caps allow.
func (t *pairTable) add(work []jobs.Work, byNode bool) {
	// Grown once: appending 10,000 pairs one by one left up to twice their
	// size allocated for the operation's whole life.
	t.pairs = slices.Grow(t.pairs, len(work))
	t.order = slices.Grow(t.order, len(work))
	for _, w := range work {
		t.order = append(t.order, len(t.pairs))
		t.pairs = append(t.pairs, pair{work: w})
	}
	t.tally[waiting] += len(work)
	if byNode {
		slices.SortStableFunc(t.order, func(a, b int) int {
			return strings.Compare(t.pairs[a].work.Node.Name, t.pairs[b].work.Node.Name)
		})
	}
	t.pos = slices.Grow(t.pos[:0], len(t.order))[:len(t.order)]
	t.skip = slices.Grow(t.skip[:0], len(t.order)+1)[:len(t.order)+1]
	for k, i := range t.order {
		t.pos[i] = k
		t.skip[k] = k
		if t.pairs[i].job != nil || t.pairs[i].state != waiting {
			t.skip[k] = k + 1
		}
	}
	t.skip[len(t.order)] = len(t.order)
}

// nextPending is the first place in order from k whose pair has no Job
// yet (len(order): none). Places laid out point past themselves, and each
// walk shortens the path it took, so a walk costs about the pairs it
// returns, not those it passes.
func (t *pairTable) nextPending(k int) int {
	end := k
	for t.skip[end] != end {
		end = t.skip[end]
	}
	for k != end {
		k, t.skip[k] = t.skip[k], end
	}
	return end
}

// pending are the waiting pairs that have no Job yet, in the order they
// take slots, read only as far as the caller reads.
func (t *pairTable) pending() iter.Seq[jobs.Pending] {
	return func(yield func(jobs.Pending) bool) {
		for k := t.nextPending(0); k < len(t.order); k = t.nextPending(k + 1) {
			i := t.order[k]
			if t.pairs[i].state != waiting {
				// Settled without a Job (its node went, say): never
				// pending again.
				t.skip[k] = k + 1
				continue
			}
			if !yield(jobs.Pending{Pair: i, Work: t.pairs[i].work}) {
				return
			}
		}
	}
}

// lay records the Jobs jobs.Layout laid out, holding their slots.
func (t *pairTable) lay(planned []jobs.Planned) []*jobRecord {
	out := make([]*jobRecord, len(planned))
	for k, pl := range planned {
		j := &jobRecord{name: pl.Name, pairs: pl.Pairs, nodeJob: pl.NodeJob, slots: slots{node: pl.Node, n: pl.Slots}, held: true}
		t.jobs[j.name] = j
		for _, i := range j.pairs {
			t.pairs[i].job = j
			t.skip[t.pos[i]] = t.pos[i] + 1
		}
		t.uncreated = append(t.uncreated, j)
		out[k] = j
	}
	return out
}

// toCreate are the Jobs to create now: those whose creates are retried and
// the pair Jobs just laid out, in the order of their pairs, then the node
// Jobs just laid out, in theirs.
func (t *pairTable) toCreate(laid []*jobRecord) []*jobRecord {
	// A Job leaves uncreated once it is created or its pairs failed for
	// good without it.
	t.uncreated = slices.DeleteFunc(t.uncreated, func(j *jobRecord) bool {
		return !j.created.IsZero() || t.pairs[j.pairs[0]].state != waiting
	})
	var out []*jobRecord
	for _, j := range t.uncreated {
		if !j.nodeJob || j.retry != nil {
			out = append(out, j)
		}
	}
	first := func(j *jobRecord) int {
		k := len(t.order)
		for _, i := range j.pairs {
			k = min(k, t.pos[i])
		}
		return k
	}
	slices.SortFunc(out, func(a, b *jobRecord) int { return first(a) - first(b) })
	for _, j := range laid {
		if j.nodeJob {
			out = append(out, j)
		}
	}
	return out
}

// created moves the pairs of Job j, created at now, to in flight.
func (t *pairTable) created(j *jobRecord, now time.Time) {
	j.created, j.retry = now, nil
	for _, i := range j.pairs {
		t.move(i, inFlight)
	}
	t.unseen = append(t.unseen, j.name)
}

// settle gives pair i its final outcome: from in flight, or from waiting
// when its Job could not be created.
func (t *pairTable) settle(i int, o results.Outcome) {
	t.pairs[i].outcome = o
	if o.State == results.Succeeded {
		t.move(i, succeeded)
	} else {
		t.move(i, failed)
	}
}

func (t *pairTable) move(i int, to pairState) {
	p := &t.pairs[i]
	t.tally[p.state]--
	t.tally[to]++
	p.state = to
}

// done says whether every pair of Job j is settled.
func (t *pairTable) done(j *jobRecord) bool {
	for _, i := range j.pairs {
		if !t.pairs[i].settled() {
			return false
		}
	}
	return true
}

// open counts the pairs not settled yet.
func (t *pairTable) open() int { return t.tally[waiting] + t.tally[inFlight] }

// takeUnseen returns the Jobs created since the last call.
func (t *pairTable) takeUnseen() []string {
	u := t.unseen
	t.unseen = nil
	return u
}

// addUnrun adds what a plan says of the pairs it does not run.
func (t *pairTable) addUnrun(present, desired, skipped int) {
	t.present += present
	t.desired += desired
	t.skipped += skipped
}

// counts are the operation's counts, as its status shows them.
func (t *pairTable) counts() v1alpha2.Counts {
	return v1alpha2.Counts{
		Desired: int32(t.desired), AlreadyPresent: int32(t.present), Skipped: int32(t.skipped),
		Waiting: int32(t.tally[waiting]), InFlight: int32(t.tally[inFlight]),
		Succeeded: int32(t.tally[succeeded]), Failed: int32(t.tally[failed] + len(t.unstarted)),
	}
}
