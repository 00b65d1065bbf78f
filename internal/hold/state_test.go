package hold

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// How a cache stands on a held node, from each combination of what the
// ledger can know of it.
func TestState(t *testing.T) {
	waiting := CacheState{Known: true}
	tests := []struct {
		name  string
		facts Facts
		want  CacheState
	}{
		{name: "nothing known: not looked at since the start", facts: Facts{}, want: CacheState{}},
		{name: "a record with images pending", facts: Facts{Record: &Record{Pending: []string{"a:1", "b:1"}}},
			want: CacheState{Known: true, Pending: []string{"a:1", "b:1"}}},
		{name: "a record with pending and failed images", facts: Facts{Record: &Record{Pending: []string{"a:1"}, Failed: []string{"b:1"}}},
			want: CacheState{Known: true, Pending: []string{"a:1"}, Failed: []string{"b:1"}}},
		{name: "a record with nothing pending: done", facts: Facts{Record: &Record{}}, want: done()},
		{name: "a record with failures only: done, naming them", facts: Facts{Record: &Record{Failed: []string{"b:1"}}}, want: done("b:1")},
		{name: "the record decides over the coverage and the operation",
			facts: Facts{Running: true, Purge: true, CoverageKnown: true, Covered: true, Record: &Record{Pending: []string{"a:1"}}},
			want:  CacheState{Known: true, Pending: []string{"a:1"}}},
		{name: "an operation runs, the node not covered: waits to join it", facts: Facts{Running: true}, want: waiting},
		{name: "an operation runs, the node covered before: done", facts: Facts{Running: true, CoverageKnown: true, Covered: true}, want: done()},
		{name: "a purge runs: it wants nothing", facts: Facts{Running: true, Purge: true}, want: done()},
		{name: "no operation, covered: done", facts: Facts{CoverageKnown: true, Covered: true}, want: done()},
		{name: "no operation, not covered: waits for a new-node operation", facts: Facts{CoverageKnown: true}, want: waiting},
		{name: "covered says nothing without a known coverage", facts: Facts{Covered: true}, want: CacheState{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(State(tt.facts)).To(Equal(tt.want))
		})
	}
}

// The release, from the facts of each cache on the node: the rules of
// Decide over what State makes of the ledger's facts.
func TestDecideFromFacts(t *testing.T) {
	const timeout = 10 * time.Minute
	webCache, allCache := imageCache("web", web, "nginx:1.27", "redis:7"), imageCache("all", nil, "busybox:1.36")
	tests := []struct {
		name     string
		web, all Facts
		at       time.Duration
		want     Reason
		notReady []string
	}{
		{name: "nothing known of either: held", want: Held},
		{name: "both covered: cached", web: Facts{CoverageKnown: true, Covered: true}, all: Facts{Record: &Record{}}, want: Cached},
		{name: "one failed image, the rest settled: failed",
			web: Facts{Record: &Record{Failed: []string{"redis:7"}}}, all: Facts{CoverageKnown: true, Covered: true}, want: Failed},
		{name: "one pending: held", web: Facts{Record: &Record{Pending: []string{"redis:7"}}}, all: Facts{Record: &Record{}}, want: Held},
		{name: "a purge of one, the other covered: cached", web: Facts{Running: true, Purge: true}, all: Facts{CoverageKnown: true, Covered: true}, want: Cached},
		{name: "at the timeout: every image not cached",
			web: Facts{Record: &Record{Pending: []string{"redis:7"}, Failed: []string{"nginx:1.27"}}}, all: Facts{CoverageKnown: true},
			at: timeout, want: Timeout, notReady: []string{"busybox:1.36", "nginx:1.27", "redis:7"}},
		{name: "at the timeout, nothing known: every image of every cache", at: timeout, want: Timeout,
			notReady: []string{"busybox:1.36", "nginx:1.27", "redis:7"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			d := Decide(Input{Node: heldNode(), Taint: caching, Timeout: timeout, Now: created.Add(tt.at), Caches: []Cache{
				{Cache: webCache, State: State(tt.web)}, {Cache: allCache, State: State(tt.all)}}})
			g.Expect(d.Reason).To(Equal(tt.want))
			g.Expect(d.NotReady).To(Equal(tt.notReady))
		})
	}
}
