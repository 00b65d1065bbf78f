package imagecache

import (
	"context"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/metrics"
	"github.com/kubefledged/kube-fledged/internal/results"
)

// eventLookups bounds how many pods' events one reconcile reads for Jobs
// that reach their deadline: enough to explain failures, never a storm of
// list calls on a large cluster where every pull failed.
const eventLookups = 100

// deadlineSlack is how long after a deadline the settling reconcile runs,
// so that Job status written at the very deadline is seen.
const deadlineSlack = 500 * time.Millisecond

// progress creates what the caps allow, settles what finished, writes
// progress now and then, and finishes the operation once all is settled.
func (r *Reconciler) progress(ctx context.Context, cache *v1alpha2.ImageCache, op *operation) (ctrl.Result, error) {
	if op.final != nil {
		return r.finish(ctx, cache, op)
	}
	createErr := r.createJobs(ctx, cache, op)
	next, err := r.settle(ctx, cache, op)
	if err != nil {
		return ctrl.Result{}, err
	}
	if op.final != nil {
		return r.finish(ctx, cache, op)
	}
	if createErr != nil {
		return ctrl.Result{}, createErr
	}
	// Settling may have freed slots for this very operation.
	if op.counts.Waiting > 0 && op.counts.InFlight == 0 {
		next = 0
	}
	wait, err := r.writeProgress(ctx, cache, op)
	if err != nil {
		return ctrl.Result{}, err
	}
	if wait > 0 && (next == 0 || wait < next) {
		next = wait
	}
	if next <= 0 {
		next = time.Second
	}
	return ctrl.Result{RequeueAfter: next}, nil
}

// settle reads the Jobs of the operation, fixes the outcome of each that
// finished or reached its deadline (releasing its slot), updates the counts,
// and fixes the final results once nothing is left. It returns when the next
// Job deadline falls.
func (r *Reconciler) settle(ctx context.Context, cache *v1alpha2.ImageCache, op *operation) (time.Duration, error) {
	// Read-only views of the cached Jobs and pods: this runs at every
	// progress step of every operation, and deep copies of 10,000 Jobs were
	// half the controller's CPU. Nothing below writes to them.
	list := &batchv1.JobList{}
	if err := r.Client.List(ctx, list, client.InNamespace(cache.Namespace), client.MatchingLabels{jobs.LabelOperation: op.id}, client.UnsafeDisableDeepCopy); err != nil {
		return 0, err
	}
	byName := make(map[string]*batchv1.Job, len(list.Items))
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	now := r.Clock.Now()
	key := client.ObjectKeyFromObject(cache)

	var pods map[string][]corev1.Pod
	podsOf := func(job string) []corev1.Pod {
		if pods == nil {
			pods = r.listPods(ctx, cache.Namespace, op.id)
		}
		return pods[job]
	}
	var next time.Duration
	lookups := 0
	for _, name := range op.names {
		if _, done := op.settled[name]; done {
			continue
		}
		created, ok := op.createdAt[name]
		if !ok {
			continue // waiting for a slot: no deadline runs yet
		}
		deadline := created.Add(r.Config.Deadline)
		expired := !now.Before(deadline)
		job := byName[name]
		var o results.Outcome
		switch {
		case job == nil && !expired:
			// Not in the cache yet, or deleted by someone: the deadline tells.
		case job == nil:
			o = results.Outcome{State: results.Failed, Expired: true, Reason: "JobDeleted", Message: "Job " + name + " was deleted before it finished"}
		default:
			o = results.FromJob(job, nil)
			if o.State == results.Failed {
				o = results.FromJob(job, podsOf(name))
			}
			if o.State == results.Pending && expired {
				var events []corev1.Event
				jobPods := podsOf(name)
				if lookups < eventLookups && len(jobPods) > 0 {
					lookups++
					events = r.podEvents(ctx, cache.Namespace, jobPods)
				}
				o = results.AtDeadline(job, jobPods, events)
			}
		}
		if o.State == results.Pending {
			if left := deadline.Sub(now) + deadlineSlack; next == 0 || left < next {
				next = left
			}
			continue
		}
		if o.Expired && job != nil && !r.Config.Retain {
			// Its slot is freed now; with the delete policy the Job goes
			// now too, so that what runs in the cluster stays within the
			// caps (it would be deleted when the operation ends anyway).
			if err := r.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
				return 0, err
			}
		}
		op.settled[name] = o
		observe(op.work[op.index[name]].Kind, o)
		if node, ok := op.holding[name]; ok {
			delete(op.holding, name)
			r.limiter.Release(key, node)
		}
	}
	metrics.JobsInFlight.Set(float64(r.limiter.InFlight()))
	op.counts = countsOf(op, len(op.createdAt)-len(op.settled), len(op.names)-len(op.createdAt))
	if len(op.settled) < len(op.names) {
		return next, nil
	}
	items := append([]results.Item{}, op.unstarted...)
	for i, name := range op.names {
		w := op.work[i]
		items = append(items, results.Item{Image: w.Image, Node: w.Node.Name, Outcome: op.settled[name]})
	}
	op.final = &finalState{items: items, summary: results.Summarise(items, op.deleting())}
	return 0, nil
}

// resultOf names a settled outcome as Job labels and metrics do.
func resultOf(o results.Outcome) string {
	switch {
	case o.State == results.Succeeded:
		return jobs.ResultSucceeded
	case o.Expired:
		return jobs.ResultExpired
	}
	return jobs.ResultFailed
}

// observe counts a settled Job in the metrics.
func observe(kind jobs.Kind, o results.Outcome) {
	metrics.JobsFinished.WithLabelValues(string(kind), resultOf(o)).Inc()
	if kind == jobs.Pull {
		pull := "succeeded"
		if o.State != results.Succeeded {
			pull = "failed"
		}
		metrics.ImagePulls.WithLabelValues(pull).Inc()
	}
}

// countsOf tallies the operation's pairs.
func countsOf(op *operation, inFlight, waiting int) v1alpha2.Counts {
	c := v1alpha2.Counts{
		Desired: int32(op.desired), AlreadyPresent: int32(op.present), Skipped: int32(op.skipped),
		Failed: int32(len(op.unstarted)), InFlight: int32(inFlight), Waiting: int32(waiting),
	}
	for _, o := range op.settled {
		if o.State == results.Succeeded {
			c.Succeeded++
		} else {
			c.Failed++
		}
	}
	return c
}

// listPods returns the pods of the operation's Jobs, by Job name. It reads
// the informer cache, which holds only our Jobs' pods.
func (r *Reconciler) listPods(ctx context.Context, ns, opID string) map[string][]corev1.Pod {
	list := &corev1.PodList{}
	out := map[string][]corev1.Pod{}
	if err := r.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{jobs.LabelOperation: opID}, client.UnsafeDisableDeepCopy); err != nil {
		return out
	}
	for _, p := range list.Items {
		job := p.Labels[batchv1.JobNameLabel]
		if job == "" {
			job = p.Labels["job-name"]
		}
		out[job] = append(out[job], p)
	}
	return out
}

// podEvents reads the events of the pods straight from the API server
// (events are not cached: there are far too many). Errors only cost detail.
func (r *Reconciler) podEvents(ctx context.Context, ns string, pods []corev1.Pod) []corev1.Event {
	var out []corev1.Event
	for _, p := range pods {
		list := &corev1.EventList{}
		err := r.APIReader.List(ctx, list, client.InNamespace(ns),
			client.MatchingFieldsSelector{Selector: fields.SelectorFromSet(fields.Set{"involvedObject.name": p.Name})})
		if err != nil {
			continue
		}
		out = append(out, list.Items...)
	}
	return out
}

func isAlreadyExists(err error) bool { return apierrors.IsAlreadyExists(err) }
