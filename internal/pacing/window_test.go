package pacing

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)

// windowStep is one event a Window sees at t0+at: Jobs sent, gone, seen
// started, or an overdue check; want is its Limit after, wantGrew whether
// a start said it grew.
type windowStep struct {
	at         time.Duration
	sent, gone []string
	started    []string
	overdue    bool
	want       int
	wantGrew   bool
}

func jobNames(prefix string, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return names
}

func TestWindow(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		name   string
		max    int
		target time.Duration
		steps  []windowStep
	}{{
		name: "no target: the cap alone", max: 100,
		steps: []windowStep{
			{sent: []string{"j"}, want: 100},
			{at: time.Hour, started: []string{"j"}, want: 100},
			{at: time.Hour, overdue: true, want: 100},
		},
	}, {
		name: "starts at ten below a larger cap and grows by one per prompt start", max: 100, target: 2 * s,
		steps: []windowStep{
			{want: 10},
			{sent: jobNames("a", 10), want: 10},
			{at: s, started: []string{"a0"}, want: 11, wantGrew: true},
			{at: s, started: jobNames("a", 10)[1:], want: 20, wantGrew: true},
		},
	}, {
		name: "a small cap is the floor and the ceiling", max: 3, target: 2 * s,
		steps: []windowStep{
			{sent: []string{"a", "b"}, want: 3},
			{at: 10 * s, started: []string{"a"}, want: 3},
			{at: 10 * s, started: []string{"b"}, want: 3},
		},
	}, {
		name: "never past the cap", max: 12, target: 2 * s,
		steps: []windowStep{
			{sent: jobNames("a", 5), want: 10},
			{started: jobNames("a", 5), want: 12, wantGrew: true},
		},
	}, {
		name: "near the target it grows by one per window of starts", max: 100, target: 2 * s,
		steps: []windowStep{
			{sent: jobNames("a", 11), want: 10},
			{at: 2 * s, started: jobNames("a", 10), want: 10},
			{at: 2 * s, started: []string{"a10"}, want: 11, wantGrew: true},
		},
	}, {
		name: "a late start cuts it by 30%, once per queue's worth of time", max: 100, target: 2 * s,
		steps: []windowStep{
			{sent: jobNames("a", 40), want: 10},
			{started: jobNames("a", 30), want: 40, wantGrew: true},
			{sent: jobNames("b", 10), at: s, want: 40},
			// b0 took 4 s: the Jobs created in those 4 s are still queued
			{at: 5 * s, started: []string{"b0"}, want: 28},
			{at: 6 * s, started: []string{"b1"}, want: 28},
			{at: 9 * s, started: []string{"b2"}, want: 19},
			{at: 20 * s, started: []string{"b3"}, want: 13},
			// never below the floor
			{at: 40 * s, started: []string{"b4"}, want: 10},
			{at: 80 * s, started: []string{"b5"}, want: 10},
		},
	}, {
		name: "an unstarted Job past twice the target cuts it (a stopped Job controller)", max: 100, target: 2 * s,
		steps: []windowStep{
			{sent: jobNames("a", 20), want: 10},
			{started: jobNames("a", 19), want: 29, wantGrew: true},
			{at: 4 * s, overdue: true, want: 29},
			{at: 5 * s, overdue: true, want: 20},
			{at: 9 * s, overdue: true, want: 20},
			{at: 11 * s, overdue: true, want: 14},
			// a Job gone unstarted is no longer waited for
			{at: 11 * s, gone: []string{"a19"}, want: 14},
			{at: time.Minute, overdue: true, want: 14},
		},
	}, {
		name: "a start of a Job it never sent, or twice, is no sign", max: 100, target: 2 * s,
		steps: []windowStep{
			{sent: []string{"a"}, want: 10},
			{started: []string{"a", "a", "x"}, want: 11, wantGrew: true},
			{at: time.Minute, started: []string{"a", "x"}, want: 11},
		},
	}, {
		name: "no cap: the window alone", target: 2 * s,
		steps: []windowStep{
			{sent: jobNames("a", 200), want: 10},
			{started: jobNames("a", 200), want: 210, wantGrew: true},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			w := NewWindow(tc.max, tc.target)
			for k, st := range tc.steps {
				now := t0.Add(st.at)
				for _, j := range st.sent {
					w.Sent(j, now)
				}
				for _, j := range st.gone {
					w.Gone(j)
				}
				grew := false
				for _, j := range st.started {
					grew = w.Started(j, now) || grew
				}
				if st.overdue {
					w.Overdue(now)
				}
				g.Expect(w.Limit()).To(Equal(st.want), "step %d: limit", k)
				g.Expect(grew).To(Equal(st.wantGrew), "step %d: grew", k)
			}
		})
	}
}

// TestLimiterWindow: the limiter caps at the window, not the cap, but lets
// an owner that holds nothing go one past it (never past the cap), and wakes
// the owners that waited when the window grows.
func TestLimiterWindow(t *testing.T) {
	g := NewWithT(t)
	var woken []types.NamespacedName
	l := New(100, 0, 2*time.Second, func(o types.NamespacedName) { woken = append(woken, o) })
	take := func(o types.NamespacedName, node string) int {
		_, slots := l.Take(o, node, 1, 1)
		return slots
	}
	for i := range 10 {
		g.Expect(take(a, fmt.Sprintf("n%d", i))).To(Equal(1))
		l.Sent(fmt.Sprintf("ns/a%d", i), t0)
	}
	g.Expect(l.Limit()).To(Equal(10))
	g.Expect(take(a, "n10")).To(BeZero(), "the window is full")
	g.Expect(take(b, "m0")).To(Equal(1), "b holds nothing: one past the window")
	g.Expect(take(b, "m1")).To(BeZero(), "b holds one now")
	l.Started("ns/a0", t0.Add(time.Second))
	g.Expect(woken).To(ContainElement(b), "b waited and the window grew")
	g.Expect(take(b, "m1")).To(BeZero(), "the window of 11 holds 11")
	l.Started("ns/a1", t0.Add(time.Second))
	g.Expect(take(b, "m1")).To(Equal(1))
	l.Gone("ns/a2")
	l.Overdue(t0.Add(10 * time.Second))
	g.Expect(l.Limit()).To(Equal(10), "an unstarted Job past twice the target cut the window of 12 to its floor")

	small := New(3, 0, 2*time.Second, nil)
	for i := range 3 {
		_, slots := small.Take(a, fmt.Sprintf("n%d", i), 1, 1)
		g.Expect(slots).To(Equal(1))
	}
	_, slots := small.Take(b, "m0", 1, 1)
	g.Expect(slots).To(BeZero(), "never past the cap")
}

// TestLimiterJoining: a Job on a joining node that holds no slot goes past
// the window and past the fair share, never past either cap; once the node
// holds a slot, its next Job is metered like any other.
func TestLimiterJoining(t *testing.T) {
	for _, tc := range []struct {
		name         string
		max, perNode int
		// fill are the slots a takes, one Job per node, before the steps.
		fill    int
		bWaits  bool // b asked for a slot and waits: a's share binds
		joining bool
		node    string
		want    int
	}{
		{name: "the window is full: a joining node goes past it", max: 100, fill: 10, joining: true, node: "new", want: 1},
		{name: "the window is full: any other node waits", max: 100, fill: 10, node: "new", want: 0},
		{name: "another owner waits: a joining node goes past a's share", max: 100, fill: 10, bWaits: true, joining: true, node: "new", want: 1},
		{name: "another owner waits: any other node of a's waits for it", max: 100, fill: 10, bWaits: true, node: "new", want: 0},
		{name: "the cap binds a joining node", max: 10, fill: 10, joining: true, node: "new", want: 0},
		{name: "the per-node cap binds a joining node", max: 100, perNode: 1, fill: 10, joining: true, node: "n0", want: 0},
		{name: "a joining node with a Job in flight waits for the window", max: 100, perNode: 2, fill: 10, joining: true, node: "n0", want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			l := New(tc.max, tc.perNode, 2*time.Second, nil)
			for i := range tc.fill {
				_, slots := l.Take(a, fmt.Sprintf("n%d", i), 10, 1)
				g.Expect(slots).To(Equal(1), "fill %d", i)
			}
			if tc.bWaits {
				// b holds one slot (an owner's first goes one past the
				// window), and waits for more.
				_, slots := l.Take(b, "m0", 10, 1)
				g.Expect(slots).To(Equal(1))
				_, slots = l.Take(b, "m1", 10, 1)
				g.Expect(slots).To(BeZero())
			}
			take := l.Take
			if tc.joining {
				take = l.TakeJoining
			}
			size, slots := take(a, tc.node, 10, 1)
			g.Expect(slots).To(Equal(tc.want), "the joining node's first Job")
			if slots == 0 {
				g.Expect(size).To(BeZero())
				return
			}
			g.Expect(size).To(Equal(10), "all its images in one Job")
			_, slots = take(a, tc.node, 10, 1)
			g.Expect(slots).To(BeZero(), "a second Job on the node, which holds a slot now, waits")
		})
	}
}

// Spent says when no node but a joining one can get a slot: the window or
// the fair share used up, not a node's own cap, which other nodes do not
// share. A caller laying out Jobs stops asking there.
func TestLimiterSpent(t *testing.T) {
	for _, tc := range []struct {
		name         string
		max, perNode int
		target       time.Duration
		bFill        int  // the slots b takes first, one Job per node
		fill         int  // the slots a takes then
		bWaits       bool // then b asks for one more, and waits
		aReleases    bool // then a gives one back
		want         bool
	}{
		{name: "the window is full", max: 100, target: 2 * time.Second, fill: 10, want: true},
		{name: "room in the window", max: 100, target: 2 * time.Second, fill: 9},
		{name: "an owner that holds nothing goes one past a full window", max: 100, target: 2 * time.Second, bFill: 10},
		{name: "the cap is reached", max: 5, fill: 5, want: true},
		{name: "room under the cap, but a's fair share is used up while b waits", max: 6, bFill: 1, fill: 5, bWaits: true, aReleases: true, want: true},
		{name: "a node's own cap leaves other nodes room", max: 100, perNode: 1, target: 2 * time.Second, fill: 5},
		{name: "no cap", fill: 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			l := New(tc.max, tc.perNode, tc.target, nil)
			for i := range tc.bFill {
				_, slots := l.Take(b, fmt.Sprintf("m%d", i), 10, 1)
				g.Expect(slots).To(Equal(1), "b's fill %d", i)
			}
			for i := range tc.fill {
				_, slots := l.Take(a, fmt.Sprintf("n%d", i), 10, 1)
				g.Expect(slots).To(Equal(1), "fill %d", i)
			}
			if tc.bWaits {
				_, slots := l.Take(b, "m-more", 10, 1)
				g.Expect(slots).To(BeZero(), "b waits")
			}
			if tc.aReleases {
				l.Release(a, "n0", 1)
			}
			g.Expect(l.Spent(a)).To(Equal(tc.want))
			_, slots := l.Take(a, "other", 10, 1)
			g.Expect(slots == 0).To(Equal(tc.want), "a Job on a node holding nothing gets a slot unless spent")
		})
	}
}
