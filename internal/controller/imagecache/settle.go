package imagecache

import (
	"context"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/results"
)

// eventLookups bounds how many pods' events one operation reads at its
// deadline: enough to explain failures, never a storm of list calls on a
// large cluster where every pull failed.
const eventLookups = 100

// deadlineSlack is how long after the deadline the settling reconcile runs,
// so that Job status written at the very deadline is seen.
const deadlineSlack = 500 * time.Millisecond

// progress creates what is missing and, once every Job is settled or the
// deadline has passed, finishes the operation.
func (r *Reconciler) progress(ctx context.Context, cache *v1alpha2.ImageCache, op *operation) (ctrl.Result, error) {
	if op.final == nil {
		if err := r.createJobs(ctx, cache, op); err != nil {
			if r.Clock.Now().Before(op.deadline) {
				return ctrl.Result{}, err
			}
			// Past the deadline, Jobs never created are failures like any
			// other, and the operation ends.
		}
		done, err := r.settle(ctx, cache, op)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !done {
			return ctrl.Result{RequeueAfter: op.deadline.Sub(r.Clock.Now()) + deadlineSlack}, nil
		}
	}
	return r.finish(ctx, cache, op)
}

// settle reads the Jobs of the operation and, when all are settled or the
// deadline has passed, fixes the operation's final results.
func (r *Reconciler) settle(ctx context.Context, cache *v1alpha2.ImageCache, op *operation) (bool, error) {
	list := &batchv1.JobList{}
	if err := r.Client.List(ctx, list, client.InNamespace(cache.Namespace), client.MatchingLabels{jobs.LabelOperation: op.id}); err != nil {
		return false, err
	}
	byName := make(map[string]*batchv1.Job, len(list.Items))
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	expired := !r.Clock.Now().Before(op.deadline)

	var pods map[string][]corev1.Pod
	podsOf := func(job string) []corev1.Pod {
		if pods == nil {
			pods = r.listPods(ctx, cache.Namespace, op.id)
		}
		return pods[job]
	}

	items := append([]results.Item{}, op.unstarted...)
	byJob := make(map[string]results.Outcome, len(op.names))
	lookups := 0
	for i, name := range op.names {
		w := op.work[i]
		job := byName[name]
		var o results.Outcome
		switch {
		case job == nil && !expired:
			return false, nil
		case job == nil && !op.created[name]:
			o = results.Outcome{State: results.Failed, Expired: true, Reason: "JobNotCreated", Message: "the Job could not be created before the deadline"}
		case job == nil:
			o = results.Outcome{State: results.Failed, Expired: true, Reason: "JobDeleted", Message: "Job " + name + " was deleted before it finished"}
		default:
			o = results.FromJob(job, nil)
			if o.State == results.Failed {
				o = results.FromJob(job, podsOf(name))
			}
			if o.State == results.Pending {
				if !expired {
					return false, nil
				}
				var events []corev1.Event
				jobPods := podsOf(name)
				if lookups < eventLookups && len(jobPods) > 0 {
					lookups++
					events = r.podEvents(ctx, cache.Namespace, jobPods)
				}
				o = results.AtDeadline(job, jobPods, events)
			}
		}
		byJob[name] = o
		items = append(items, results.Item{Image: w.Image, Node: w.Node.Name, Outcome: o})
	}
	op.final = &finalState{items: items, byJob: byJob, summary: results.Summarise(items, op.deleting())}
	return true, nil
}

// listPods returns the pods of the operation's Jobs, by Job name. It reads
// the informer cache, which holds only our Jobs' pods.
func (r *Reconciler) listPods(ctx context.Context, ns, opID string) map[string][]corev1.Pod {
	list := &corev1.PodList{}
	out := map[string][]corev1.Pod{}
	if err := r.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{jobs.LabelOperation: opID}); err != nil {
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
