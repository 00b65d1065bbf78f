// Package hold decides when a node that registered with the startup taint
// is released: from the node, the ImageCaches and how each stands on the
// node, it says whether to remove the taint now, and why. It is pure, so
// every rule is unit-tested without a cluster; the startuptaint controller
// gathers the input and acts on the answer.
//
// The rules, in order:
//   - a node no cache applies to is released at once: nothing will ever be
//     pulled onto it;
//   - a node whose every (image, node) pair of every applying cache is
//     settled is released: all succeeded or were already present (Cached),
//     or some failed (Failed). A failing image does not keep a node out of
//     service: it will not pull better for waiting, and the release says
//     which images failed;
//   - otherwise the node is released at its timeout, counted from its
//     creation, naming the images that were not cached (Timeout);
//   - until then it is held.
package hold

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/plan"
)

// CacheState is how one cache stands on one held node, as the ImageCache
// reconciler knows it.
type CacheState struct {
	// Known is false while the reconciler has not looked at the cache since
	// it started: nothing can be said yet.
	Known bool
	// Done says that every pair of the cache on the node is settled.
	Done bool
	// Pending are the images not settled yet, when the reconciler has
	// planned them; nil when it has not (the node waits for an operation).
	Pending []string
	// Failed are the images that failed on the node.
	Failed []string
}

// Facts are what the ImageCache reconciler has told of one cache and one
// held node (package heldledger keeps them), each part for the cache's
// current UID only: a cache deleted and recreated under its name is
// another cache, of which nothing is known yet.
type Facts struct {
	// Running says that an operation of the cache runs; Purge, that it is
	// a purge.
	Running, Purge bool
	// CoverageKnown says that the reconciler knows the nodes the cache's
	// images were last put on; Covered, that the node is one of them.
	CoverageKnown, Covered bool
	// Record is the node's record, kept from the start of an operation
	// that pulls onto it; nil when there is none.
	Record *Record
}

// Record is how the pulls of one cache on one held node stand.
type Record struct {
	// Pending are the images not settled yet, sorted.
	Pending []string
	// Failed are the images that failed, sorted.
	Failed []string
}

// State says how a cache stands on a held node from the facts:
//
//   - With a record: done once nothing is pending, with the failed images.
//   - Without one, while an operation runs: a purge wants nothing; otherwise
//     the node is done only if an earlier operation covered it (it got the
//     taint after), else it waits to join the operation or to get one of
//     its own when this one ends.
//   - Without one or an operation: done if covered, else waiting for the
//     new-node operation the next reconcile starts.
//   - Not known while the reconciler has not looked at the cache since it
//     started: it has neither an operation nor a coverage of it.
func State(f Facts) CacheState {
	if r := f.Record; r != nil {
		st := CacheState{Known: true, Done: len(r.Pending) == 0, Failed: r.Failed}
		if !st.Done {
			st.Pending = r.Pending
		}
		return st
	}
	covered := f.CoverageKnown && f.Covered
	if f.Running {
		return CacheState{Known: true, Done: covered || f.Purge}
	}
	if !f.CoverageKnown {
		return CacheState{}
	}
	return CacheState{Known: true, Done: covered}
}

// Cache is one ImageCache and how it stands on the node.
type Cache struct {
	Cache *v1alpha2.ImageCache
	State CacheState
}

// Input is what a decision reads.
type Input struct {
	Node    *corev1.Node
	Taint   *plan.StartupTaint
	Timeout time.Duration
	Now     time.Time
	Caches  []Cache
}

// Reason is why a node is released; Held while it is not.
type Reason string

// The values are also the reason label of the release metrics.
const (
	Held    Reason = ""
	Cached  Reason = "cached"
	Failed  Reason = "failed"
	NoCache Reason = "no_cache"
	Timeout Reason = "timeout"
)

// Decision is what to do with a node that carries the startup taint.
type Decision struct {
	Reason Reason
	// Caches are the caches that apply to the node (namespace/name).
	Caches []string
	// Waiting are the applying caches not settled on the node yet.
	Waiting []string
	// Failed are the images that failed on the node.
	Failed []string
	// NotReady, at a timeout, are the images not cached on the node:
	// pending or failed.
	NotReady []string
	// Since is how long the node has existed.
	Since time.Duration
	// After is, while held, how long until the timeout releases it.
	After time.Duration
}

// Release says whether the taint goes now.
func (d Decision) Release() bool { return d.Reason != Held }

// Decide applies the rules of the package to one node.
func Decide(in Input) Decision {
	created := in.Node.CreationTimestamp.Time
	d := Decision{Since: in.Now.Sub(created)}
	failed, pending := set{}, set{}
	for _, c := range in.Caches {
		images, ok := Applies(c.Cache, in.Node, in.Taint)
		if !ok {
			continue
		}
		key := c.Cache.Namespace + "/" + c.Cache.Name
		d.Caches = append(d.Caches, key)
		failed.add(c.State.Failed...)
		if c.State.Known && c.State.Done {
			continue
		}
		d.Waiting = append(d.Waiting, key)
		if c.State.Known && c.State.Pending != nil {
			pending.add(c.State.Pending...)
		} else {
			pending.add(images...)
		}
	}
	sort.Strings(d.Caches)
	sort.Strings(d.Waiting)
	d.Failed = slices.Sorted(maps.Keys(failed))
	deadline := created.Add(in.Timeout)
	switch {
	case len(d.Caches) == 0:
		d.Reason = NoCache
	case len(d.Waiting) == 0 && len(d.Failed) == 0:
		d.Reason = Cached
	case len(d.Waiting) == 0:
		d.Reason = Failed
	case !in.Now.Before(deadline):
		d.Reason = Timeout
		pending.add(d.Failed...)
		d.NotReady = slices.Sorted(maps.Keys(pending))
	default:
		d.After = deadline.Sub(in.Now)
	}
	return d
}

// Waiting are the images known not to be cached on the node yet: pending
// or failed in a cache whose state is known. Unlike a decision's NotReady,
// it leaves out the caches the reconciler has not looked at since it
// started (on a replica that is not the leader, every cache): what it says
// of them would be a guess, where NotReady must name everything that may be
// missing from a node going into service.
func Waiting(in Input) []string {
	out := map[string]bool{}
	for _, c := range in.Caches {
		images, ok := Applies(c.Cache, in.Node, in.Taint)
		if !ok || !c.State.Known {
			continue
		}
		for _, img := range c.State.Failed {
			out[img] = true
		}
		if c.State.Done {
			continue
		}
		if c.State.Pending != nil {
			images = c.State.Pending
		}
		for _, img := range images {
			out[img] = true
		}
	}
	return slices.Sorted(maps.Keys(out))
}

// Applies says whether a cache will put images on the node, and which: the
// images of its lists that select the node and may run there, now or once
// the node is Ready and schedulable (a new node is often NotReady at first).
// A list whose Jobs can never run there (the node is not Linux, or has a
// taint the list does not tolerate, the startup taint aside) does not
// apply, nor does a cache being deleted or purged: it wants nothing on any
// node.
func Applies(c *v1alpha2.ImageCache, n *corev1.Node, taint *plan.StartupTaint) ([]string, bool) {
	if !c.DeletionTimestamp.IsZero() || c.Status.Reason == string(plan.Purge) {
		return nil, false
	}
	var images []string
	applies := false
	for i := range c.Spec.CacheSpec {
		l := &c.Spec.CacheSpec[i]
		if !plan.Selects(l, n) {
			continue
		}
		switch plan.SkipWith(n, l, taint) {
		case "", v1alpha2.SkipNotReady, v1alpha2.SkipCordoned:
			applies = true
			images = append(images, l.Images...)
		}
	}
	return images, applies
}

// Event is the Event the release records on the node: its type, reason and
// message. A release with failures or at the timeout is a Warning, naming
// the images; the metrics count them, since image names would be labels
// without bound.
func (d Decision) Event(taint *plan.StartupTaint) (string, string, string) {
	took := d.Since.Round(time.Second)
	switch d.Reason {
	case NoCache:
		return corev1.EventTypeNormal, "StartupTaintRemoved",
			fmt.Sprintf("No ImageCache puts images on the node: removed taint %s (%s after the node was created)", taint, took)
	case Cached:
		return corev1.EventTypeNormal, "StartupTaintRemoved",
			fmt.Sprintf("The images of %s are on the node: removed taint %s (%s after the node was created)", caches(d.Caches), taint, took)
	case Failed:
		return corev1.EventTypeWarning, "StartupTaintRemovedImagesFailed",
			fmt.Sprintf("%d image(s) of %s failed to pull onto the node: %s; the other images are on it. Removed taint %s (%s after the node was created): a failing image does not keep a node out of service",
				len(d.Failed), caches(d.Caches), names(d.Failed), taint, took)
	case Timeout:
		return corev1.EventTypeWarning, "StartupTaintTimeout",
			fmt.Sprintf("%d image(s) of %s were not cached on the node within %s: %s. Removed taint %s anyway",
				len(d.NotReady), caches(d.Waiting), took, names(d.NotReady), taint)
	}
	return "", "", ""
}

// maxNames bounds the names an Event lists: a message has a size limit,
// and a node with hundreds of failures is explained by the first few.
const maxNames = 10

func names(l []string) string {
	if len(l) > maxNames {
		return strings.Join(l[:maxNames], ", ") + fmt.Sprintf(" and %d more", len(l)-maxNames)
	}
	return strings.Join(l, ", ")
}

func caches(l []string) string {
	if len(l) == 1 {
		return "ImageCache " + l[0]
	}
	return "ImageCaches " + names(l)
}

type set map[string]bool

func (s set) add(l ...string) {
	for _, x := range l {
		s[x] = true
	}
}
