// Package imagecache runs ImageCache operations: it decides which operation
// is due, starts its Jobs within the pacing caps, settles their results and
// decides the status, which cachestatus writes (status.go). The decisions
// themselves live in the pure packages plan, jobs and results.
package imagecache

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/controller/cachestatus"
	"github.com/kubefledged/kube-fledged/internal/heldledger"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/jobwatch"
	"github.com/kubefledged/kube-fledged/internal/pacing"
	"github.com/kubefledged/kube-fledged/internal/plan"
)

// Config is the controller's behaviour as set by its flags.
type Config struct {
	// Deadline is --image-pull-deadline-duration, counted per Job from its
	// creation.
	Deadline time.Duration
	// RefreshEvery is --image-cache-refresh-frequency (0: off).
	RefreshEvery time.Duration
	// Retention is --job-retention-policy: whether settled Jobs go at once
	// (jobs.RetainNone, the zero value) or stay for the user to read
	// (jobs.Retain) until their pair runs again (retention.go).
	Retention jobs.Retention
	// AlwaysPull is --image-pull-policy=Always.
	AlwaysPull bool
	Jobs       jobs.Options
	// Granularity is --pull-job-granularity: node Jobs (jobs.PerNode, the
	// zero value) or a Job per (image, node) (jobs.PerImage).
	Granularity jobs.Granularity
	// PinImages is --pin-images: whether a cache whose spec.pin is unset
	// pins its images.
	PinImages bool
	// MaxJobs and MaxJobsPerNode are --max-concurrent-jobs and
	// --max-concurrent-jobs-per-node (0: no cap).
	MaxJobs, MaxJobsPerNode int
	// JobStartTarget is --max-job-start-delay: how long the Job
	// controller may take to start a Job before fewer are let in flight
	// (pacing.Window; 0: the caps alone).
	JobStartTarget time.Duration
	// WriteParallelism bounds the API writes one reconcile sends at once:
	// Job creates, deletes and patches alike.
	WriteParallelism int
	// MaxConcurrentReconciles is how many caches are worked on at once.
	MaxConcurrentReconciles int
	// StatusInterval is the least time between two progress writes of one
	// cache; final writes are never held back.
	StatusInterval time.Duration
	// StartupTaint is --node-startup-taint, or nil. The pull Jobs tolerate
	// it (Jobs.PullTolerations carries its toleration), it leaves no node
	// out, and a node that carries it is new to every cache that has not
	// served it (see plan.ExistedAt).
	StartupTaint *plan.StartupTaint
}

// JobIndex is what the reconciler reads of its running Jobs, and where their
// events come from: jobwatch in the controller, a stand-in in unit tests.
type JobIndex interface {
	// Get returns the Job as last seen, or nil; nothing may write to it.
	Get(ns, name string) *batchv1.Job
	Source(h handler.EventHandler) source.SyncingSource
}

var _ JobIndex = &jobwatch.Watch{}

// Reconciler drives ImageCache operations.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	// Jobs holds the controller's running Jobs; they are never read
	// through Client, whose cache would hold them whole a second time.
	Jobs JobIndex
	// Pods holds every pod's images, for fromPods; nil reports fromPods
	// as not followed.
	Pods     PodIndex
	Recorder record.EventRecorder
	Clock    clock.Clock
	Config   Config
	// Ready is closed when the start-up clean-up has finished; no operation
	// starts before, so no new Job can be deleted by it.
	Ready <-chan struct{}
	// Held, with the startup taint on, is where the reconciler writes how
	// each cache stands on each node the taint holds (held.go), for the
	// startup-taint controller and the metrics to read; nil with it off.
	Held *heldledger.Ledger

	started time.Time
	ops     *tracker
	// pinned is what this process pinned, per cache (pinledger.go).
	pinned  *pinLedger
	limiter *pacing.Limiter
	wake    chan event.TypedGenericEvent[*v1alpha2.ImageCache]
}

// SetupWithManager registers the reconciler. Jobs are owned: every change of
// a Job's status wakes its cache (cacheForJob), so no result is missed, however
// fast its pod finished. Node changes wake the caches whose lists select the
// node.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Jobs == nil {
		return fmt.Errorf("imagecache: no Job watch")
	}
	r.init()
	b := ctrl.NewControllerManagedBy(mgr).
		Named("imagecache").
		For(&v1alpha2.ImageCache{}).
		WatchesRawSource(r.Jobs.Source(handler.EnqueueRequestsFromMapFunc(r.cacheForJob))).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.cachesForNode), builder.WithPredicates(nodeChanges())).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.cacheForPod), builder.WithPredicates(jobPodChanges(r.perNode()))).
		WatchesRawSource(source.Channel(r.wake, &handler.TypedEnqueueRequestForObject[*v1alpha2.ImageCache]{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Config.MaxConcurrentReconciles})
	if r.Pods != nil {
		for _, s := range r.Pods.Sources(handler.EnqueueRequestsFromMapFunc(r.cachesForPods), podChanges()) {
			b = b.WatchesRawSource(s)
		}
	}
	return b.Complete(r)
}

// init fills the defaults and the memory of running operations; unit tests
// call it instead of SetupWithManager and then Reconcile directly.
func (r *Reconciler) init() {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.Config.WriteParallelism <= 0 {
		r.Config.WriteParallelism = 16
	}
	if r.Config.MaxConcurrentReconciles <= 0 {
		r.Config.MaxConcurrentReconciles = 4
	}
	if r.Config.StatusInterval <= 0 {
		r.Config.StatusInterval = time.Second
	}
	r.started = r.Clock.Now()
	r.ops = newTracker(r.Held)
	r.pinned = newPinLedger()
	r.wake = make(chan event.TypedGenericEvent[*v1alpha2.ImageCache], 1024)
	r.limiter = pacing.New(r.Config.MaxJobs, r.Config.MaxJobsPerNode, r.Config.JobStartTarget, r.wakeUp)
}

// perNode says whether pulls run in node Jobs.
func (r *Reconciler) perNode() bool { return r.Config.Granularity == jobs.PerNode }

// wakeUp enqueues a cache that waited for a pacing slot.
func (r *Reconciler) wakeUp(k types.NamespacedName) {
	obj := &v1alpha2.ImageCache{}
	obj.Namespace, obj.Name = k.Namespace, k.Name
	select {
	case r.wake <- event.TypedGenericEvent[*v1alpha2.ImageCache]{Object: obj}:
	default:
		// The queue is full of wake-ups already; each waiter also
		// requeues itself, so none is lost.
	}
}

// Reconcile moves one cache one step: start a due operation, or progress
// and finish the running one.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if r.Ready != nil {
		select {
		case <-r.Ready:
		case <-ctx.Done():
			return ctrl.Result{}, ctx.Err()
		}
	}
	cache, err := r.live(ctx, req.NamespacedName)
	if cache == nil {
		return ctrl.Result{}, err
	}
	if !cache.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, cache)
	}
	if op := r.running(req.NamespacedName, cache); op != nil {
		if err := r.grow(ctx, cache, op); err != nil {
			return ctrl.Result{}, err
		}
		return r.progress(ctx, cache, op)
	}
	return r.idle(ctx, cache)
}

// live reads the cache, or returns nil when it is gone or going: then what
// the controller holds of it is forgotten and the Jobs its owner reference
// cannot reach are deleted, and a nil error says that went well. A cache
// going that holds UnpinFinalizer is returned, its operation forgotten,
// for its pins to be released first (finalize).
func (r *Reconciler) live(ctx context.Context, key types.NamespacedName) (*v1alpha2.ImageCache, error) {
	cache := &v1alpha2.ImageCache{}
	if err := r.Client.Get(ctx, key, cache); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
		r.pinned.gone(key)
	} else if cache.DeletionTimestamp.IsZero() {
		return cache, nil
	} else if controllerutil.ContainsFinalizer(cache, v1alpha2.UnpinFinalizer) {
		r.forget(key)
		return cache, nil
	}
	// Its Jobs in its namespace go with it through their owner
	// references; the images stay on the nodes, as in the original.
	r.forget(key)
	return nil, r.deleteJobsElsewhere(ctx, key)
}

// running is the cache's operation in memory, if it has one. One of a cache
// deleted and made again under its name is forgotten: the new cache starts
// anew.
func (r *Reconciler) running(key types.NamespacedName, cache *v1alpha2.ImageCache) *operation {
	op := r.ops.get(key)
	if op != nil && op.uid != cache.UID {
		r.forget(key)
		return nil
	}
	return op
}

// idle looks, for a cache with no operation running, for the one due: a
// spec edit, an annotation, a refresh, the pods fromPods selects running
// other images, new nodes. With none due it says when to look again.
func (r *Reconciler) idle(ctx context.Context, cache *v1alpha2.ImageCache) (ctrl.Result, error) {
	if cache.Status.Status == v1alpha2.ImageCacheActionStatusProcessing {
		// Processing with no operation in memory: either our read is stale
		// (the update below then conflicts and we retry on fresh data) or the
		// operation was lost; abort it so that it runs again.
		log.FromContext(ctx).Info("found Processing cache without a running operation; aborting it to run it again")
		return ctrl.Result{}, r.abort(ctx, cache)
	}
	if r.stoppedPinning(cache) {
		return r.stopPinning(ctx, cache)
	}
	kind, due, after := plan.Due(cache, plan.Timing{Now: r.Clock.Now(), Started: r.started, RefreshEvery: r.Config.RefreshEvery})
	if due {
		return r.start(ctx, cache, kind, nil)
	}
	if plan.ByOriginal(cache.Status) {
		return ctrl.Result{RequeueAfter: after}, r.adopt(ctx, cache)
	}
	if specTooLarge(&cache.Spec) != "" {
		// Declined when it was due; a node joining changes nothing.
		return ctrl.Result{RequeueAfter: after}, nil
	}
	res, started, err := r.followPods(ctx, cache)
	if started || err != nil {
		return res, err
	}
	if res.RequeueAfter > 0 && (after == 0 || res.RequeueAfter < after) {
		after = res.RequeueAfter
	}
	if newNodes, err := r.newNodes(ctx, cache); err != nil {
		return ctrl.Result{}, err
	} else if len(newNodes) > 0 {
		return r.start(ctx, cache, plan.NewNodes, newNodes)
	}
	return ctrl.Result{RequeueAfter: after}, nil
}

// deleteJobsElsewhere deletes the Jobs of a cache that is gone which its
// owner reference cannot take with it: its delete Jobs in the controller's
// namespace, running or retained. An error retries the reconcile; a
// controller that was down when the cache went deletes them at start-up
// (preflight). A cache made again under the same name meanwhile has no
// delete Job yet: its first operation, a create, only pulls.
func (r *Reconciler) deleteJobsElsewhere(ctx context.Context, k types.NamespacedName) error {
	stub := &v1alpha2.ImageCache{}
	stub.Namespace, stub.Name = k.Namespace, k.Name
	ns := jobs.Namespace(stub, jobs.Delete, r.Config.Jobs)
	if ns == k.Namespace {
		return nil
	}
	err := r.Client.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(ns),
		client.MatchingLabels(jobs.CacheSelector(k.Namespace, k.Name)),
		client.PropagationPolicy(metav1.DeletePropagationBackground))
	return client.IgnoreNotFound(err)
}

// forget releases everything held for a cache that is gone.
func (r *Reconciler) forget(k types.NamespacedName) {
	if op := r.ops.get(k); op != nil {
		r.releaseAll(k, op)
	}
	r.ops.forget(k)
	r.limiter.Forget(k)
}

// releaseAll gives back the slots an ending or forgotten operation still
// holds; the gauge follows, or it would show Jobs in flight that are gone.
func (r *Reconciler) releaseAll(k types.NamespacedName, op *operation) {
	for _, j := range op.table.jobs {
		if j.held {
			j.held = false
			r.limiter.Release(k, j.slots.node, j.slots.n)
			r.limiter.Gone(windowKey(k, j.name))
		}
	}
	if op.pins != nil {
		for _, pj := range op.pins.running {
			if pj.held {
				pj.held = false
				r.limiter.Release(k, pj.slots.node, pj.slots.n)
			}
		}
	}
	r.gaugeSlots()
}

// adopt takes over a cache the original left finished when no operation is
// due (its periodic refresh is off, or it was last purged): it records the
// generation the original's status stands for, so that an edit from now on
// runs as an update, and, unless the images were purged, the spec as what
// is on the nodes, so that the update deletes what the edit removes, as the
// original's did. Nothing else of the status changes. Otherwise the cache
// would stay the original's for good, its edits never acted on (see
// plan.ByOriginal). The update carries the resourceVersion read.
func (r *Reconciler) adopt(ctx context.Context, cache *v1alpha2.ImageCache) error {
	cache.Status.ObservedGeneration = cache.Generation
	if cache.Status.Reason != string(plan.Purge) {
		cache.Status.ProcessedSpec = cache.Spec.DeepCopy()
	}
	log.FromContext(ctx).Info("took over a cache the original kube-fledged left, with nothing due", "generation", cache.Generation)
	return r.statusWriter().WriteTransition(ctx, cache)
}

// abort marks a cache whose operation cannot be finished. The transition
// carries the resourceVersion read, so a stale read fails instead of
// aborting a live operation.
func (r *Reconciler) abort(ctx context.Context, cache *v1alpha2.ImageCache) error {
	cachestatus.Abort(cache, r.Clock.Now())
	return r.statusWriter().WriteTransition(ctx, cache)
}
