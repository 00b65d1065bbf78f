package imagecache

import (
	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/controller/cachestatus"
)

// statusWriter is how the reconciler writes a cache's status: every write
// is one of cachestatus's three kinds (a transition, a progress update, the
// final write), none goes to the API server from this package.
func (r *Reconciler) statusWriter() cachestatus.Writer {
	return cachestatus.Writer{Client: r.Client, Reader: r.APIReader, Clock: r.Clock, Interval: r.Config.StatusInterval}
}

// progress is done/desired: pairs pulled (or deleted) or already there, of
// those on eligible nodes.
func progress(c v1alpha2.Counts) string { return cachestatus.ProgressOf(c) }

// setConditions sets Progressing and Ready as cachestatus.SetConditions
// says, for the spec of generation.
func setConditions(cache *v1alpha2.ImageCache, running bool, reason, message string, generation int64) {
	cachestatus.SetConditions(&cache.Status, running, reason, message, generation)
}
