package imagecache

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/plan"
	"github.com/kubefledged/kube-fledged/internal/podimages"
	"github.com/kubefledged/kube-fledged/internal/podwatch"
)

// PodIndex is what the reconciler reads of the cluster's pods for fromPods
// and of its workloads for fromWorkloads: podwatch in the controller, a
// stand-in in unit tests.
type PodIndex interface {
	// Snapshot returns the pods and every namespace's labels as last seen,
	// or why they cannot be read (podwatch.ErrNotSynced at first).
	Snapshot() ([]*corev1.Pod, map[string]labels.Set, error)
	// Workloads returns the workloads' pod templates and every namespace's
	// labels as last seen, or why they cannot be read, as Snapshot does.
	Workloads() ([]podimages.Workload, map[string]labels.Set, error)
	// Sources feed the events of pods, workloads and namespaces.
	Sources(h handler.EventHandler, preds ...predicate.Predicate) []source.Source
}

var _ PodIndex = &podwatch.Watch{}

// Condition reasons of PodsResolved.
const (
	podsResolved       = "Resolved"
	podsNotListedYet   = "PodsNotListedYet"
	podsUnreadable     = "PodsUnreadable"
	workloadsUnread    = "WorkloadsUnreadable"
	podsNoWatch        = "NoPodWatch"
	podsBadSelector    = "InvalidSelector"
	podsImagesDropped  = "PodImagesDropped"
	podsRetryUnread    = 30 * time.Second
	podsRetryNotListed = 2 * time.Second
)

// podsResult is what resolving a cache's fromPods gave: the record of the
// images to cache, and the PodsResolved condition. When the pods cannot be
// read, the record is what the cache holds already: the images found
// before stay cached rather than being dropped for a failure of ours.
type podsResult struct {
	record []v1alpha2.ListPodImages
	cond   metav1.Condition
	retry  time.Duration
}

func (p podsResult) ok() bool { return p.cond.Status == metav1.ConditionTrue }

// resolvePods reads what the cache's lists follow and resolves it to the
// images to cache, in steps: read, then one of unreadable, a bad selector,
// or resolved.
func (r *Reconciler) resolvePods(cache *v1alpha2.ImageCache) podsResult {
	held := cache.Status.PodImages
	cond := metav1.Condition{Type: v1alpha2.ConditionPodsResolved, Status: metav1.ConditionFalse, ObservedGeneration: cache.Generation}
	if r.Pods == nil {
		cond.Reason, cond.Message = podsNoWatch, "this controller was started without a pod watch: fromPods and fromWorkloads are not followed"
		return podsResult{record: held, cond: cond}
	}
	in := r.readFollowed(&cache.Spec)
	if in.podsErr != nil || in.workloadErr != nil {
		return unreadable(held, cond, in.podsErr, in.workloadErr)
	}
	record, bad := podimages.Resolve(cache.Namespace, cache.Spec.CacheSpec, in.pods, in.workloads, in.namespaces)
	if len(bad) > 0 {
		return badSelectors(held, record, cond, bad)
	}
	return resolved(cond, record, in.usesPods, in.usesWorkloads)
}

// followed is what a cache's lists follow, as the pod watch last saw it.
type followed struct {
	usesPods, usesWorkloads bool
	pods                    []*corev1.Pod
	workloads               []podimages.Workload
	namespaces              map[string]labels.Set
	podsErr, workloadErr    error
}

// readFollowed reads only the kinds the spec follows: the workload
// informers start when a cache first asks for them.
func (r *Reconciler) readFollowed(spec *v1alpha2.ImageCacheSpec) followed {
	in := followed{usesPods: podimages.UsesPods(spec), usesWorkloads: podimages.UsesWorkloads(spec)}
	if in.usesPods {
		in.pods, in.namespaces, in.podsErr = r.Pods.Snapshot()
	}
	if in.usesWorkloads {
		in.workloads, in.namespaces, in.workloadErr = r.Pods.Workloads()
	}
	return in
}

// unreadable keeps the images found before when the pods or workloads
// cannot be read: a failure of ours must not drop what the user's pods
// need. Still listing (podwatch.ErrNotSynced, for podwatch.SyncGrace at
// most) is retried soon; anything else every podsRetryUnread.
func unreadable(held []v1alpha2.ListPodImages, cond metav1.Condition, podsErr, workloadErr error) podsResult {
	out := podsResult{record: held, cond: cond, retry: podsRetryUnread}
	var why []string
	if podsErr != nil && !errors.Is(podsErr, podwatch.ErrNotSynced) {
		out.cond.Reason = podsUnreadable
		why = append(why, "the controller cannot read the pods fromPods selects; the images found before stay cached: "+podsErr.Error())
	}
	if workloadErr != nil && !errors.Is(workloadErr, podwatch.ErrNotSynced) {
		if out.cond.Reason == "" {
			out.cond.Reason = workloadsUnread
		}
		why = append(why, "the controller cannot read the workloads fromWorkloads selects; the images found before stay cached: "+workloadErr.Error())
	}
	if len(why) == 0 {
		out.cond.Reason, out.cond.Message, out.retry = podsNotListedYet, errors.Join(podsErr, workloadErr).Error(), podsRetryNotListed
		return out
	}
	out.cond.Message = strings.Join(why, "; ")
	return out
}

// badSelectors keeps, for each list whose selector is bad, the images it
// held before, and says which lists and why; the other lists resolve.
func badSelectors(held, record []v1alpha2.ListPodImages, cond metav1.Condition, bad map[int]error) podsResult {
	var why []string
	for i, err := range bad {
		why = append(why, fmt.Sprintf("cacheSpec[%d].%v", i, err))
		for _, h := range held {
			if int(h.List) == i {
				record = append(record, h)
			}
		}
	}
	sort.Strings(why)
	sort.Slice(record, func(a, b int) bool { return record[a].List < record[b].List })
	cond.Reason, cond.Message = podsBadSelector, strings.Join(why, "; ")
	return podsResult{record: record, cond: cond}
}

// resolved says how many pods and workloads were selected and images
// cached, and how many were left out over the bound.
func resolved(cond metav1.Condition, record []v1alpha2.ListPodImages, usesPods, usesWorkloads bool) podsResult {
	var npods, nworkloads, nimages, omitted int32
	for _, l := range record {
		npods += l.Pods
		nworkloads += l.Workloads
		nimages += int32(len(l.Images))
		omitted += l.Omitted
	}
	var selected []string
	if usesPods {
		selected = append(selected, fmt.Sprintf("%d pod(s)", npods))
	}
	if usesWorkloads {
		selected = append(selected, fmt.Sprintf("%d workload(s)", nworkloads))
	}
	cond.Status, cond.Reason = metav1.ConditionTrue, podsResolved
	cond.Message = fmt.Sprintf("%s selected, %d image(s) cached for them", strings.Join(selected, " and "), nimages)
	if omitted > 0 {
		cond.Message += fmt.Sprintf("; %d more not cached, over the limit of %d per ImageCache: split the pods over several caches",
			omitted, v1alpha2.MaxPodImages)
	}
	return podsResult{record: record, cond: cond}
}

// setPodsCondition sets PodsResolved, or removes it from a cache without
// fromPods or fromWorkloads, and says whether it changed (its time aside).
func setPodsCondition(st *v1alpha2.ImageCacheStatus, uses bool, cond metav1.Condition) bool {
	if !uses {
		return meta.RemoveStatusCondition(&st.Conditions, v1alpha2.ConditionPodsResolved)
	}
	return meta.SetStatusCondition(&st.Conditions, cond)
}

// podsOf is the record of pod images an operation of kind acts on. A
// create, update or refresh follows the pods as they are now; a new-node
// operation brings new nodes level with what the cache holds, and a purge
// deletes what it holds.
func (r *Reconciler) podsOf(cache *v1alpha2.ImageCache, kind plan.Operation) ([]v1alpha2.ListPodImages, *podsResult) {
	if kind == plan.NewNodes || kind == plan.Purge {
		return cache.Status.PodImages, nil
	}
	if !podimages.Uses(&cache.Spec) {
		return nil, nil
	}
	res := r.resolvePods(cache)
	return res.record, &res
}

// followPods keeps a cache with fromPods or fromWorkloads level with its
// pods and workload templates when no operation is due: an image they
// gained starts an update, which pulls it; an image none names any more
// only leaves the record, without a Job. A
// purged cache follows nothing until its spec changes or it is refreshed,
// as it pulls nothing else. started says that an operation began.
func (r *Reconciler) followPods(ctx context.Context, cache *v1alpha2.ImageCache) (res ctrl.Result, started bool, err error) {
	uses := podimages.Uses(&cache.Spec)
	if cache.Status.Reason == string(plan.Purge) || (!uses && cache.Status.PodImages == nil &&
		meta.FindStatusCondition(cache.Status.Conditions, v1alpha2.ConditionPodsResolved) == nil) {
		return ctrl.Result{}, false, nil
	}
	var pods podsResult
	if uses {
		pods = r.resolvePods(cache)
		if pods.cond.Reason == podsNotListedYet {
			// Not worth a status write: the watch's first events come
			// within seconds (podwatch.SyncGrace at most).
			return ctrl.Result{RequeueAfter: pods.retry}, false, nil
		}
		if pods.ok() && podimages.Gained(cache.Status.PodImages, pods.record) {
			res, err := r.start(ctx, cache, plan.Update, nil)
			return res, true, err
		}
	}
	dropped := lost(cache.Status.PodImages, pods.record)
	changed := !equality.Semantic.DeepEqual(cache.Status.PodImages, pods.record)
	wasReason := ""
	if c := meta.FindStatusCondition(cache.Status.Conditions, v1alpha2.ConditionPodsResolved); c != nil {
		wasReason = c.Reason
	}
	condChanged := setPodsCondition(&cache.Status, uses, pods.cond)
	if changed || condChanged {
		cache.Status.PodImages = pods.record
		// The resourceVersion of our read guards this write: a stale read
		// conflicts, and the next reconcile looks again.
		if err := r.statusWriter().WriteTransition(ctx, cache); err != nil {
			return ctrl.Result{}, false, err
		}
		if len(dropped) > 0 {
			r.Recorder.Event(cache, corev1.EventTypeNormal, podsImagesDropped,
				"no selected pod runs these any more, nor does a selected workload's template name them; they are no longer cached, and stay on the nodes until a purge or the kubelet's garbage collection: "+strings.Join(dropped, ", "))
		}
		if uses && !pods.ok() && wasReason != pods.cond.Reason {
			r.Recorder.Event(cache, corev1.EventTypeWarning, pods.cond.Reason, pods.cond.Message)
		}
	}
	return ctrl.Result{RequeueAfter: pods.retry}, false, nil
}

// lost lists the images was holds and now does not, list by list.
func lost(was, now []v1alpha2.ListPodImages) []string {
	var out []string
	for _, w := range was {
		still := map[string]bool{}
		for _, img := range podimages.Images(now, int(w.List)) {
			still[podimages.Key(img)] = true
		}
		for _, img := range w.Images {
			if !still[podimages.Key(img.Image)] {
				out = append(out, img.Image)
			}
		}
	}
	return out
}

// podChanges lets through the pod, workload and namespace events that can
// change what fromPods and fromWorkloads find: one comes or goes, or its
// labels or images (a workload's template's) change. Status updates, most
// of a pod's and a workload's events, are ignored.
func podChanges() predicate.Predicate {
	return changes(passes{creates: true, deletes: true}, func(o, n client.Object) bool {
		if ow, ok := podimages.WorkloadOf(o); ok || isWorkload(o) {
			nw, nok := podimages.WorkloadOf(n)
			return ok != nok || !reflect.DeepEqual(ow, nw)
		}
		if !reflect.DeepEqual(o.GetLabels(), n.GetLabels()) {
			return true
		}
		op, ok1 := o.(*corev1.Pod)
		np, ok2 := n.(*corev1.Pod)
		return ok1 && ok2 && !reflect.DeepEqual(podimages.Of(op), podimages.Of(np))
	})
}

// isWorkload says whether obj is of a kind fromWorkloads follows, even
// one WorkloadOf passes over because it is being deleted.
func isWorkload(obj client.Object) bool {
	switch obj.(type) {
	case *appsv1.Deployment, *appsv1.StatefulSet, *appsv1.DaemonSet, *batchv1.CronJob:
		return true
	}
	return false
}

// cachesForPods maps a pod, workload or namespace event to the caches
// whose fromPods or fromWorkloads may select it: a pod or workload in the
// cache's namespace, or in any namespace when the list's selection has a
// namespaceSelector. The reconcile resolves them exactly. It tells the
// running operations of those caches that their pods may have changed.
func (r *Reconciler) cachesForPods(ctx context.Context, obj client.Object) []reconcile.Request {
	out := r.cachesOfPod(ctx, obj)
	for _, req := range out {
		r.ops.followedChanged(req.NamespacedName)
	}
	return out
}

// cachesOfPod are the caches cachesForPods wakes.
func (r *Reconciler) cachesOfPod(ctx context.Context, obj client.Object) []reconcile.Request {
	_, isNamespace := obj.(*corev1.Namespace)
	workload := isWorkload(obj)
	return r.cachesWhere(ctx, func(c *v1alpha2.ImageCache, l *v1alpha2.CacheSpecImages) bool {
		var nsSel *metav1.LabelSelector
		switch {
		case isNamespace:
			return (l.FromPods != nil && l.FromPods.NamespaceSelector != nil) ||
				(l.FromWorkloads != nil && l.FromWorkloads.NamespaceSelector != nil)
		case workload && l.FromWorkloads != nil:
			nsSel = l.FromWorkloads.NamespaceSelector
		case !workload && l.FromPods != nil:
			nsSel = l.FromPods.NamespaceSelector
		default:
			return false
		}
		return nsSel != nil || obj.GetNamespace() == c.Namespace
	})
}
