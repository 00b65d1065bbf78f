package imagecache

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/controller/cachestatus"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/metrics"
	"github.com/kubefledged/kube-fledged/internal/plan"
	"github.com/kubefledged/kube-fledged/internal/podimages"
	"github.com/kubefledged/kube-fledged/internal/results"
)

// unpinOperation is the operation label of the Jobs that release a cache's
// pins when it is deleted or stops pinning: one per cache, so that the
// Jobs of a retried reconcile are the same ones.
func unpinOperation(uid types.UID) string { return "unpin-" + string(uid) }

// unpinTally is how the unpin Jobs of a cache stand.
type unpinTally struct {
	jobs, left, failed int
}

// unpinAll releases every pin of the cache with an unpin Job per node its
// lists select that can pin (their fixed names make every reconcile find
// the same Jobs), and says how they stand. The nodes are those of today:
// a node gone took its pins with it.
func (r *Reconciler) unpinAll(ctx context.Context, cache *v1alpha2.ImageCache) (unpinTally, error) {
	nodes, err := r.listNodes(ctx)
	if err != nil {
		return unpinTally{}, err
	}
	never := func(string, string) bool { return false }
	w := plan.Pins(plan.PinInput{Spec: podimages.Effective(cache.Spec, cache.Status.PodImages), Nodes: nodes.Items,
		StartupTaint: r.Config.StartupTaint, Failed: never, Pinned: never})
	owner := jobs.Owner{Cache: cache, Operation: unpinOperation(cache.UID)}
	var t unpinTally
	var pods map[string][]corev1.Pod
	for _, node := range sortedKeys(w.Images) {
		for imgs := w.Images[node]; len(imgs) > 0; {
			chunk := imgs[:min(len(imgs), jobs.MaxPinImages)]
			imgs = imgs[len(chunk):]
			t.jobs++
			job, err := jobs.BuildPin(owner, jobs.Unpin, w.Nodes[node], chunk, nil, r.Config.Jobs)
			if err != nil {
				t.failed += len(chunk)
				continue
			}
			obj := r.Jobs.Get(job.Namespace, job.Name)
			if obj == nil {
				t.left++
				if err := r.Client.Create(ctx, job); err == nil {
					metrics.JobsCreated.WithLabelValues(string(jobs.Unpin)).Inc()
				} else if !isAlreadyExists(err) {
					return t, err
				}
				continue
			}
			if pods == nil {
				pods = r.listPods(ctx, r.jobNamespaces(cache), owner.Operation)
			}
			out, done := results.Pin(obj, pods[job.Name], chunk)
			if !done {
				t.left++
			}
			t.failed += len(out.Failed)
		}
	}
	return t, nil
}

// unpinUntil runs unpinAll until its Jobs are settled or the deadline from
// since has passed, and says whether it is over, else when to look again.
// Over by the deadline, the Event says what may be left pinned.
func (r *Reconciler) unpinUntil(ctx context.Context, cache *v1alpha2.ImageCache, since time.Time, why string) (bool, time.Duration, error) {
	if r.pinned.isUnpinned(cache.UID) {
		return true, 0, nil
	}
	t, err := r.unpinAll(ctx, cache)
	if err != nil {
		return false, 0, err
	}
	deadline := since.Add(r.Config.Deadline)
	now := r.Clock.Now()
	switch {
	case t.left > 0 && now.Before(deadline):
		return false, min(deadline.Sub(now)+deadlineSlack, 5*time.Second), nil
	case t.left > 0 || t.failed > 0:
		r.Recorder.Event(cache, corev1.EventTypeWarning, "UnpinIncomplete", fmt.Sprintf(
			"%s: of %d unpin Jobs, %d did not finish before the deadline and %d images failed to unpin: "+
				"they may stay pinned on their nodes (see docs/pinning.md to unpin them by hand)", why, t.jobs, t.left, t.failed))
	default:
		r.Recorder.Event(cache, corev1.EventTypeNormal, "Unpinned", fmt.Sprintf("%s: its images are unpinned on every node (%d unpin Jobs)", why, t.jobs))
	}
	log.FromContext(ctx).Info("unpinned", "why", why, "jobs", t.jobs, "unfinished", t.left, "failed", t.failed)
	r.pinned.setUnpinned(cache.UID, true)
	return true, 0, r.deleteUnpinJobs(ctx, cache)
}

// deleteUnpinJobs deletes the settled unpin Jobs under the delete policy;
// retained, they go with the next restart's clean-up.
func (r *Reconciler) deleteUnpinJobs(ctx context.Context, cache *v1alpha2.ImageCache) error {
	if !r.deletesSettled() {
		return nil
	}
	for _, ns := range r.jobNamespaces(cache) {
		err := r.Client.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(ns),
			client.MatchingLabels{jobs.LabelOperation: unpinOperation(cache.UID)}, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// finalize releases the pins of a cache being deleted, then lets it go.
func (r *Reconciler) finalize(ctx context.Context, cache *v1alpha2.ImageCache) (ctrl.Result, error) {
	// The deadline counts from when this process first saw the deletion,
	// by its own clock: the API server's deletionTimestamp is another's.
	since := r.pinned.unpinSince(cache.UID, r.Clock.Now())
	over, next, err := r.unpinUntil(ctx, cache, since, "the ImageCache is being deleted")
	if err != nil || !over {
		return ctrl.Result{RequeueAfter: next}, err
	}
	if err := r.setFinalizer(ctx, cache, false); err != nil {
		return ctrl.Result{}, err
	}
	r.pinned.forget(cache.UID)
	r.pinned.setUnpinned(cache.UID, false)
	return ctrl.Result{}, nil
}

// stopPinning releases the pins of a cache that pinned and pins no more
// (spec.pin turned false), then clears status.pins and the finalizer.
func (r *Reconciler) stopPinning(ctx context.Context, cache *v1alpha2.ImageCache) (ctrl.Result, error) {
	since := r.pinned.unpinSince(cache.UID, r.Clock.Now())
	over, next, err := r.unpinUntil(ctx, cache, since, "the ImageCache no longer pins")
	if err != nil || !over {
		return ctrl.Result{RequeueAfter: next}, err
	}
	// The finalizer first: its patch carries the resourceVersion read,
	// which the status write would move on.
	if err := r.setFinalizer(ctx, cache, false); err != nil {
		return ctrl.Result{}, err
	}
	err = r.statusWriter().WriteFinal(ctx, client.ObjectKeyFromObject(cache), cache.UID, 0, func(st *v1alpha2.ImageCacheStatus, _ int) {
		cachestatus.SetPins(st, nil, 0, cache.Generation)
	})
	if err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.pinned.forget(cache.UID)
	return ctrl.Result{}, nil
}

// stoppedPinning says whether a cache holds pins it no longer wants.
func (r *Reconciler) stoppedPinning(cache *v1alpha2.ImageCache) bool {
	return !r.pins(cache) && (cache.Status.Pins != nil || controllerutil.ContainsFinalizer(cache, v1alpha2.UnpinFinalizer))
}

// setFinalizer adds or removes UnpinFinalizer. The patch carries the
// resourceVersion read, so a stale read retries instead of dropping a
// finalizer another writer added meanwhile.
func (r *Reconciler) setFinalizer(ctx context.Context, cache *v1alpha2.ImageCache, on bool) error {
	if controllerutil.ContainsFinalizer(cache, v1alpha2.UnpinFinalizer) == on {
		return nil
	}
	patch := client.MergeFromWithOptions(cache.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if on {
		controllerutil.AddFinalizer(cache, v1alpha2.UnpinFinalizer)
	} else {
		controllerutil.RemoveFinalizer(cache, v1alpha2.UnpinFinalizer)
	}
	return client.IgnoreNotFound(r.Client.Patch(ctx, cache, patch))
}
