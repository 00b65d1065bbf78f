// Package plan decides, from an ImageCache and the nodes, which operation is
// due and which (image, node) work it takes. It is pure, so every decision is
// unit-tested without a cluster.
package plan

import (
	"time"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
)

// Operation is the kind of an ImageCache operation; its value is the reason
// the original wrote into status.
type Operation string

const (
	Create  Operation = v1alpha2.ImageCacheReasonImageCacheCreate
	Update  Operation = v1alpha2.ImageCacheReasonImageCacheUpdate
	Refresh Operation = v1alpha2.ImageCacheReasonImageCacheRefresh
	Purge   Operation = v1alpha2.ImageCacheReasonImageCachePurge
	// NewNodes pulls a cache's images onto nodes that joined (or came to
	// match) since its last operation, and onto no other node.
	NewNodes Operation = v1alpha2.ImageCacheReasonImageCacheNewNodes
)

// Clock settings for Due.
type Timing struct {
	Now time.Time
	// Started is when this controller started: a cache not refreshed since is
	// refreshed at once, as the original did at start-up.
	Started time.Time
	// RefreshEvery is --image-cache-refresh-frequency; 0 turns periodic (and
	// start-up) refresh off.
	RefreshEvery time.Duration
}

// Due says which operation the cache needs now. When none is due it returns
// how long until the next periodic refresh (0: never).
//
// The order matters: an unfinished (aborted) operation or a new cache comes
// first, then purge (which the original let win over refresh), then a spec
// change, then refresh on demand, then periodic refresh.
func Due(c *v1alpha2.ImageCache, t Timing) (op Operation, due bool, after time.Duration) {
	st := c.Status
	_, purge := c.Annotations[v1alpha2.PurgeAnnotation]
	_, refresh := c.Annotations[v1alpha2.RefreshAnnotation]
	switch {
	case st.Status == "":
		return Create, true, 0
	case purge:
		return Purge, true, 0
	case st.Status == v1alpha2.ImageCacheActionStatusAborted && st.ProcessedSpec == nil && st.Reason != string(Purge):
		// Aborted before any operation had finished: the create runs again.
		return Create, true, 0
	case c.Generation != st.ObservedGeneration && !ByOriginal(st):
		return Update, true, 0
	case refresh || st.Status == v1alpha2.ImageCacheActionStatusAborted:
		return Refresh, true, 0
	}
	if t.RefreshEvery <= 0 || st.Reason == string(Purge) {
		return "", false, 0
	}
	// The period counts from the last operation over the whole cache: new
	// nodes end operations of their own as often as nodes come and go, and
	// must not postpone the refresh of every other node. Caches written
	// before refreshedTime existed count from their last completion.
	last := t.Started
	switch {
	case st.RefreshedTime != nil:
		last = st.RefreshedTime.Time
	case st.CompletionTime != nil:
		last = st.CompletionTime.Time
	}
	// Status times have whole seconds: a refresh that ended in the second
	// the controller started would otherwise look older than the start, and
	// run again until the clock reached the next second.
	if last.Before(t.Started.Truncate(time.Second)) {
		return Refresh, true, 0
	}
	next := last.Add(t.RefreshEvery)
	if !t.Now.Before(next) {
		return Refresh, true, 0
	}
	return "", false, next.Sub(t.Now)
}

// ByOriginal says whether the status was last written by the original
// kube-fledged, which recorded no observedGeneration; every operation of
// ours that ends records one, and a running one is never passed to Due. Its
// CRD had no status subresource, so each of its status writes bumped
// metadata.generation: that a cache's generation is ahead says nothing of
// its spec, which the original acted on as it stands (a spec edit ran an
// update). Taking such a cache over is then not an update of unknown
// extent but what the original would do next: the refresh at start-up, or
// nothing after a purge.
func ByOriginal(st v1alpha2.ImageCacheStatus) bool {
	return st.Status != "" && st.ObservedGeneration == 0
}
