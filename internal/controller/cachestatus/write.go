// Package cachestatus is the one home of ImageCache status writes. Every
// write of a cache's status goes through this file, as one of three kinds,
// each with its own concurrency rule:
//
//   - a transition (WriteTransition) starts or aborts an operation, or
//     records a decision taken on a read (taking over the original's cache,
//     the images of the pods followed). It carries the resourceVersion read,
//     so a decision made on a stale read conflicts instead of overwriting
//     what another write said.
//   - a progress update (WriteProgress) writes the counts of a running
//     operation, coalesced to at most one per interval per cache, as a merge
//     patch of those fields alone.
//   - the final write (WriteFinal) ends an operation on a fresh read with
//     optimistic concurrency, and is the one place a status that does not
//     fit is made smaller.
//
// The package sits below both of its users, the ImageCache reconciler and
// the start-up clean-up (preflight), and imports neither: the clean-up runs
// before the reconciler may start (the reconciler waits for it), so its
// writes must not depend on the reconciler's code, and the reconciler's
// must not depend on the clean-up. Data flows one way: each user decides,
// this package writes.
package cachestatus

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
)

// MaxFailures bounds the entries of status.failures: on a large cluster an
// image failing everywhere would otherwise outgrow the object. The count of
// what was left out goes to status.failuresOmitted.
const MaxFailures = 200

// Writer writes cache statuses. Only WriteFinal reads (through Reader), and
// only WriteProgress keeps time (Clock, Interval).
type Writer struct {
	Client client.Client
	// Reader must read from the API server: the final write starts from
	// the status as it is, not as an informer last saw it.
	Reader client.Reader
	Clock  clock.Clock
	// Interval is the least time between two progress writes of a cache.
	Interval time.Duration
}

// WriteTransition writes the status of cache as read and changed by the
// caller. The resourceVersion of that read guards the write: on a stale
// read it conflicts, and nothing the caller decided has happened.
func (w Writer) WriteTransition(ctx context.Context, cache *v1alpha2.ImageCache) error {
	return w.Client.Status().Update(ctx, cache)
}

// Pace is what coalesces one operation's progress writes: the counts last
// written and when.
type Pace struct {
	written v1alpha2.Counts
	at      time.Time
}

// Paced is the pace of an operation whose transition wrote counts at at.
func Paced(counts v1alpha2.Counts, at time.Time) Pace {
	return Pace{written: counts, at: at}
}

// WriteProgress writes counts when they changed since the last write, at
// most once per Interval; it returns how long to wait before a held-back
// write is due. A merge patch of just these fields needs no
// resourceVersion: during an operation the controller alone writes the
// status. A cache gone meanwhile is no error.
func (w Writer) WriteProgress(ctx context.Context, cache *v1alpha2.ImageCache, counts v1alpha2.Counts, pace *Pace) (time.Duration, error) {
	if counts == pace.written {
		return 0, nil
	}
	if wait := pace.at.Add(w.Interval).Sub(w.Clock.Now()); wait > 0 {
		return wait, nil
	}
	body, err := json.Marshal(map[string]any{"status": map[string]any{"counts": counts, "progress": ProgressOf(counts)}})
	if err != nil {
		return 0, err
	}
	target := &v1alpha2.ImageCache{ObjectMeta: metav1.ObjectMeta{Namespace: cache.Namespace, Name: cache.Name}}
	if err := w.Client.Status().Patch(ctx, target, client.RawPatch(types.MergePatchType, body)); err != nil {
		return 0, client.IgnoreNotFound(err)
	}
	*pace = Paced(counts, w.Clock.Now())
	return 0, nil
}

// WriteFinal writes a cache's status with set applied to a fresh read,
// retrying conflicts; a cache deleted, or made again under its name (uid
// differs), answers NotFound. When the API server refuses the object for
// good (too large for etcd, or a policy on its size), set is applied again
// with half as many failures as the last try allowed, starting from
// failures (at most MaxFailures) down to none; set keeps that many with
// BoundFailures, and failuresOmitted counts the rest. A status that cannot
// be written would leave the cache Processing for ever.
func (w Writer) WriteFinal(ctx context.Context, key types.NamespacedName, uid types.UID, failures int, set func(st *v1alpha2.ImageCacheStatus, limit int)) error {
	for limit := min(MaxFailures, failures); ; limit /= 2 {
		err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
			fresh := &v1alpha2.ImageCache{}
			if err := w.Reader.Get(ctx, key, fresh); err != nil {
				return err
			}
			if fresh.UID != uid {
				return apierrors.NewNotFound(v1alpha2.GroupVersion.WithResource("imagecaches").GroupResource(), key.Name)
			}
			set(&fresh.Status, limit)
			return w.Client.Status().Update(ctx, fresh)
		})
		if err == nil || limit == 0 || !statusRefused(err) {
			return err
		}
		log.FromContext(ctx).Info("the final status was refused; writing it with fewer failures", "failures", limit/2, "error", err.Error())
	}
}

// statusRefused tells a status the API server will never take as it is
// from an error that may pass. etcd's own limit comes back as an internal
// error naming the request as too large.
func statusRefused(err error) bool {
	return RefusedForGood(err) || (apierrors.IsInternalError(err) && strings.Contains(err.Error(), "too large"))
}

// RefusedForGood tells a refusal from an error that may pass. Quotas and
// admission policies answer Forbidden (or Invalid, for a policy that says
// so); a malformed object is Invalid or BadRequest. Timeouts, conflicts,
// throttling, 5xx and network errors are retried. A Job's create is told
// the same way as a status write.
func RefusedForGood(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsMethodNotSupported(err) || apierrors.IsRequestEntityTooLargeError(err) ||
		apierrors.IsNotAcceptable(err) || apierrors.IsUnsupportedMediaType(err)
}

// BoundFailures keeps at most limit node entries, taking images in turn so
// that every failing image shows while there is room, and returns how many
// were left out. It is how a final status is shrunk to the limit
// WriteFinal gives.
func BoundFailures(f map[string]v1alpha2.NodeReasonMessageList, limit int) (map[string]v1alpha2.NodeReasonMessageList, int32) {
	total := 0
	for _, l := range f {
		total += len(l)
	}
	if total <= limit {
		return f, 0
	}
	images := make([]string, 0, len(f))
	for img := range f {
		images = append(images, img)
	}
	sort.Strings(images)
	var out map[string]v1alpha2.NodeReasonMessageList
	kept := 0
	for round := 0; kept < limit; round++ {
		progressed := false
		for _, img := range images {
			if l := f[img]; round < len(l) && kept < limit {
				if out == nil {
					out = map[string]v1alpha2.NodeReasonMessageList{}
				}
				out[img] = append(out[img], l[round])
				kept++
				progressed = true
			}
		}
		if !progressed {
			break
		}
	}
	return out, int32(total - kept)
}
