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

// unpinTally is how the unpin Jobs of a cache stand: running (created and
// within their deadline), waiting (not created: the cap), expired (past
// their deadline unfinished) and the images that failed to unpin.
type unpinTally struct {
	jobs, running, waiting, expired, failed int
	// next is the earliest deadline of a running Job.
	next time.Time
}

// over says whether nothing is left to wait for.
func (t unpinTally) over() bool { return t.running == 0 && t.waiting == 0 }

// unpinJob is one unpin Job a cache needs: its images on one node; err
// when the Job cannot be built.
type unpinJob struct {
	job    *batchv1.Job
	images []string
	err    error
}

// unpinJobsOf are the unpin Jobs of every node the cache's lists select
// that can pin (their fixed names make every reconcile find the same Jobs).
// The nodes are those of today: a node gone took its pins with it.
func (r *Reconciler) unpinJobsOf(ctx context.Context, cache *v1alpha2.ImageCache) ([]unpinJob, error) {
	nodes, err := r.listNodes(ctx)
	if err != nil {
		return nil, err
	}
	never := func(string, string) bool { return false }
	w := plan.Pins(plan.PinInput{Spec: podimages.Effective(cache.Spec, cache.Status.PodImages), Nodes: nodes.Items,
		StartupTaint: r.Config.StartupTaint, Failed: never, Pinned: never})
	owner := jobs.Owner{Cache: cache, Operation: unpinOperation(cache.UID)}
	var out []unpinJob
	for _, node := range sortedKeys(w.Images) {
		for imgs := w.Images[node]; len(imgs) > 0; {
			chunk := imgs[:min(len(imgs), jobs.MaxPinImages)]
			imgs = imgs[len(chunk):]
			job, err := jobs.BuildPin(owner, jobs.Unpin, w.Nodes[node], chunk, nil, r.Config.Jobs)
			out = append(out, unpinJob{job: job, images: chunk, err: err})
		}
	}
	return out, nil
}

// unpinAll releases every pin of the cache with its unpin Jobs, at most
// --max-concurrent-jobs of them running at once: deleting a cache that
// pins on thousands of nodes must not send thousands of privileged Jobs
// in one burst. They take no pull slots (they pull nothing, and end in a
// second). Each Job's deadline counts from its first create, so a Job held
// back by the cap never expires while it waits; one past its deadline
// frees its place, so that a node that never runs it (gone, NotReady)
// cannot hold the others back, and a create that keeps failing ends there.
func (r *Reconciler) unpinAll(ctx context.Context, cache *v1alpha2.ImageCache) (unpinTally, error) {
	all, err := r.unpinJobsOf(ctx, cache)
	if err != nil {
		return unpinTally{}, err
	}
	t := unpinTally{jobs: len(all)}
	now := r.Clock.Now()
	var pods map[string][]corev1.Pod
	var missing []unpinJob
	for _, u := range all {
		if u.err != nil {
			t.failed += len(u.images)
			continue
		}
		obj := r.Jobs.Get(u.job.Namespace, u.job.Name)
		if obj == nil {
			missing = append(missing, u)
			continue
		}
		if pods == nil {
			pods = r.listPods(ctx, r.jobNamespaces(cache), unpinOperation(cache.UID))
		}
		out, done := results.Pin(obj, pods[u.job.Name], u.images)
		t.failed += len(out.Failed)
		if !done {
			t.count(r.pinned.unpinJobSince(cache.UID, u.job.Name, now).Add(r.Config.Deadline), now)
		}
	}
	for _, u := range missing {
		if r.Config.MaxJobs > 0 && t.running >= r.Config.MaxJobs {
			t.waiting++
			continue
		}
		r.createUnpinJob(ctx, cache, u, now, &t)
	}
	return t, nil
}

// createUnpinJob creates an unpin Job the index does not hold. A create
// refused for good fails its images; any other failure is retried at the
// next look, until the Job's deadline.
func (r *Reconciler) createUnpinJob(ctx context.Context, cache *v1alpha2.ImageCache, u unpinJob, now time.Time, t *unpinTally) {
	err := r.Client.Create(ctx, u.job)
	switch {
	case err == nil:
		metrics.JobsCreated.WithLabelValues(string(jobs.Unpin)).Inc()
	case isAlreadyExists(err):
		// Created by an earlier look; the index has not seen it yet.
	case cachestatus.RefusedForGood(err):
		log.FromContext(ctx).Info("unpin job refused", "job", u.job.Name, "error", err.Error())
		t.failed += len(u.images)
		return
	default:
		log.FromContext(ctx).Info("creating unpin job failed; retrying", "job", u.job.Name, "error", err.Error())
	}
	t.count(r.pinned.unpinJobSince(cache.UID, u.job.Name, now).Add(r.Config.Deadline), now)
}

// count adds an unfinished Job whose deadline is at deadline.
func (t *unpinTally) count(deadline, now time.Time) {
	if !now.Before(deadline) {
		t.expired++
		return
	}
	t.running++
	if t.next.IsZero() || deadline.Before(t.next) {
		t.next = deadline
	}
}

// unpinUntil runs unpinAll until every unpin Job has finished or reached
// its deadline, and says whether it is over, else when to look again (Job
// events wake the cache sooner). Over, the Event says what may be left
// pinned.
func (r *Reconciler) unpinUntil(ctx context.Context, cache *v1alpha2.ImageCache, why string) (bool, time.Duration, error) {
	if r.pinned.isUnpinned(cache.UID) {
		return true, 0, nil
	}
	t, err := r.unpinAll(ctx, cache)
	if err != nil {
		return false, 0, err
	}
	if !t.over() {
		next := 5 * time.Second
		if !t.next.IsZero() {
			next = min(t.next.Sub(r.Clock.Now())+deadlineSlack, next)
		}
		return false, next, nil
	}
	if t.expired > 0 || t.failed > 0 {
		r.Recorder.Event(cache, corev1.EventTypeWarning, "UnpinIncomplete", fmt.Sprintf(
			"%s: of %d unpin Jobs, %d did not finish before the deadline and %d images failed to unpin: "+
				"they may stay pinned on their nodes (see docs/pinning.md to unpin them by hand)", why, t.jobs, t.expired, t.failed))
	} else {
		r.Recorder.Event(cache, corev1.EventTypeNormal, "Unpinned", fmt.Sprintf("%s: its images are unpinned on every node (%d unpin Jobs)", why, t.jobs))
	}
	log.FromContext(ctx).Info("unpinned", "why", why, "jobs", t.jobs, "unfinished", t.expired, "failed", t.failed)
	r.pinned.setUnpinned(cache.UID, client.ObjectKeyFromObject(cache))
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
	over, next, err := r.unpinUntil(ctx, cache, "the ImageCache is being deleted")
	if err != nil || !over {
		return ctrl.Result{RequeueAfter: next}, err
	}
	if err := r.setFinalizer(ctx, cache, false); err != nil {
		return ctrl.Result{}, err
	}
	// What it pinned is forgotten; that its unpinning is over is kept until
	// a read finds it gone (live): the informer may show it a while longer,
	// still with the finalizer, and must not make it unpin again.
	r.pinned.forget(cache.UID)
	return ctrl.Result{}, nil
}

// stopPinning releases the pins of a cache that pinned and pins no more
// (spec.pin turned false), then clears status.pins and the finalizer.
func (r *Reconciler) stopPinning(ctx context.Context, cache *v1alpha2.ImageCache) (ctrl.Result, error) {
	over, next, err := r.unpinUntil(ctx, cache, "the ImageCache no longer pins")
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
