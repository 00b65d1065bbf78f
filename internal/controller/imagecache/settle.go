package imagecache

import (
	"context"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/metrics"
	"github.com/kubefledged/kube-fledged/internal/plan"
	"github.com/kubefledged/kube-fledged/internal/results"
)

// eventLookups bounds how many pods' events one reconcile reads for Jobs
// that reach their deadline: enough to explain failures, never a storm of
// list calls on a large cluster where every pull failed.
const eventLookups = 100

// deadlineSlack is how long after a deadline the settling reconcile runs,
// so that Job status written at the very deadline is seen.
const deadlineSlack = 500 * time.Millisecond

// settle fixes the outcome of each Job that finished or reached its deadline
// (releasing its slot), deletes it under the delete policy, updates the
// counts, and fixes the final results once nothing is left. It returns when
// the next Job deadline falls.
//
// Only Jobs that may have changed are read: those with events since the last
// settle, those created since, and, once the earliest deadline has passed,
// every unsettled one. Job events wake the cache, so nothing else can have
// changed; reading all 10,000 Jobs of an operation at each of its events was
// most of the controller's CPU.
func (r *Reconciler) settle(ctx context.Context, cache *v1alpha2.ImageCache, op *operation) (time.Duration, error) {
	s := &settlement{r: r, ctx: ctx, cache: cache, op: op, now: r.Clock.Now(), key: client.ObjectKeyFromObject(cache)}
	changed := s.changed()
	if !op.nextDeadline.IsZero() && !s.now.Before(op.nextDeadline) {
		s.scanAll()
	} else {
		for job := range changed {
			if j := op.table.jobs[job]; j != nil {
				s.settleJob(j)
			}
		}
	}
	s.release()
	if op.table.open() > 0 {
		var next time.Duration
		if !op.nextDeadline.IsZero() {
			next = op.nextDeadline.Sub(s.now) + deadlineSlack
		}
		return next, nil
	}
	op.final = finalOf(op)
	return 0, nil
}

// settlement is one settle of one operation: what it read (pods, events)
// and what it settled, for the steps that follow.
type settlement struct {
	r     *Reconciler
	ctx   context.Context
	cache *v1alpha2.ImageCache
	op    *operation
	now   time.Time
	key   client.ObjectKey

	// pods are the operation's pods by Job, listed at the first need.
	pods map[string][]corev1.Pod
	// lookups counts the pods' event reads, bounded by eventLookups.
	lookups int
	// gone are the settled Jobs to delete; settled the pairs settled now.
	gone    []string
	settled []int
}

// changed are the Jobs with events since the last settle and those created
// since; it takes them, so the next settle starts afresh.
func (s *settlement) changed() map[string]bool {
	look := s.r.ops.takeChanged(s.key)
	if look == nil {
		look = map[string]bool{}
	}
	for _, name := range s.op.table.takeUnseen() {
		look[name] = true
	}
	return look
}

// scanAll settles every unsettled Job, once a deadline has passed, and
// notes when the next one falls.
func (s *settlement) scanAll() {
	op := s.op
	op.nextDeadline = time.Time{}
	looked := map[*jobRecord]bool{}
	for i := range op.table.pairs {
		p := &op.table.pairs[i]
		// A pair with no Job, or whose Job waits for its create, has no
		// deadline running.
		if p.settled() || p.job == nil || p.job.created.IsZero() {
			continue
		}
		if !looked[p.job] {
			looked[p.job] = true
			s.settleJob(p.job)
		}
		if p.settled() {
			continue
		}
		if d := p.job.created.Add(s.r.Config.Deadline); op.nextDeadline.IsZero() || d.Before(op.nextDeadline) {
			op.nextDeadline = d
		}
	}
}

// settleJob settles what it can of the pairs of Job j: a Job per (image,
// node) from its own status, a node Job container by container, since it
// ends only once all of them have.
func (s *settlement) settleJob(j *jobRecord) {
	op := s.op
	open := s.openPairs(j)
	if len(open) == 0 {
		return
	}
	expired := !s.now.Before(j.created.Add(s.r.Config.Deadline))
	obj := s.r.Jobs.Get(s.r.jobNamespace(s.cache, op, j.name), j.name)
	outs := s.outcomes(j, obj, open, expired)
	left := len(open)
	for k, i := range open {
		o := outs[k]
		if o.State == results.Pending {
			continue
		}
		left--
		op.table.settle(i, o)
		observe(op.table.pairs[i].work.Kind, o, j.nodeJob)
		s.settled = append(s.settled, i)
	}
	if left == 0 && j.nodeJob {
		var all results.Outcome
		for k, i := range j.pairs {
			all = worse(all, op.table.pairs[i].outcome, k > 0)
		}
		observeJob(jobs.Pull, all)
	}
	// A node Job goes once every container has a result: before, it
	// still pulls the others' images.
	if left == 0 && obj != nil && s.r.deletesSettled() {
		s.gone = append(s.gone, j.name)
	}
}

// openPairs are Job j's pairs not settled yet; none before it is created,
// since no deadline runs before the Job exists.
func (s *settlement) openPairs(j *jobRecord) []int {
	if j.created.IsZero() {
		return nil
	}
	var open []int
	for _, i := range j.pairs {
		if !s.op.table.pairs[i].settled() {
			open = append(open, i)
		}
	}
	return open
}

// outcomes reads the outcome of each open pair of one Job (obj, nil when
// the Job is not in the cache); Pending leaves a pair open.
func (s *settlement) outcomes(j *jobRecord, obj *batchv1.Job, open []int, expired bool) []results.Outcome {
	job := j.name
	outs := make([]results.Outcome, len(open))
	switch {
	case obj == nil && !expired:
		// Not in the cache yet, or deleted by someone: the deadline tells.
	case obj == nil:
		for k := range outs {
			outs[k] = results.Outcome{State: results.Failed, Expired: true, Reason: "JobDeleted", Message: "Job " + job + " was deleted before it finished"}
		}
		// Gone from the cache, maybe not from the cluster: the end of
		// the operation makes sure.
		s.op.sweep = true
	case j.nodeJob:
		// Containers finish one by one while the Job runs: its pod,
		// not its status, tells how each went.
		jobPods := s.podsOf(job)
		var events []corev1.Event
		if expired {
			events = s.eventsOf(job, jobPods)
		}
		containers := make([]string, len(open))
		for k, i := range open {
			containers[k] = jobs.ContainerName(slices.Index(j.pairs, i))
		}
		outs = results.Containers(obj, jobPods, containers, expired, events)
	default:
		o := results.FromJob(obj, nil)
		if o.State == results.Failed {
			o = results.FromJob(obj, s.podsOf(job))
		}
		switch {
		case o.State == results.Pending && expired:
			jobPods := s.podsOf(job)
			o = results.AtDeadline(obj, jobPods, s.eventsOf(job, jobPods))
		case o.State == results.Pending:
			// An image that cannot be pulled for good fails at
			// once, as in a node Job; one whose registry may heal
			// waits for the kubelet's next attempt.
			o = results.BeforeDeadline(s.podsOf(job))
		case o.State == results.Succeeded && s.op.table.pairs[open[0]].work.Kind == jobs.Delete:
			// It may have kept the image: in use, or pinned.
			o = results.Deleted(o, s.podsOf(job))
		}
		outs[0] = o
	}
	return outs
}

// podsOf are the pods of one Job of the operation.
func (s *settlement) podsOf(job string) []corev1.Pod {
	if s.pods == nil {
		s.pods = s.r.listPods(s.ctx, s.r.jobNamespaces(s.cache), s.op.id)
	}
	return s.pods[job]
}

// eventsOf are the events of a Job's pods, to explain a pull that reached
// its deadline, or the Job's own when it has no pod (the API server refused
// them: the Job controller says why); none once the settle has read
// eventLookups objects' events.
func (s *settlement) eventsOf(job string, jobPods []corev1.Pod) []corev1.Event {
	if s.lookups >= eventLookups {
		return nil
	}
	s.lookups++
	names := make([]string, len(jobPods))
	for i, p := range jobPods {
		names[i] = p.Name
	}
	if len(names) == 0 {
		names = []string{job}
	}
	return s.r.eventsOfObjects(s.ctx, s.r.jobNamespace(s.cache, s.op, job), names)
}

// release deletes the Jobs settled under the delete policy and frees the
// slots of the Jobs whose last pair was settled now.
//
// With the delete policy a settled Job goes at once: its result is known,
// and the end of a large operation has no mass deletion left to wait for.
// Its slot is freed only then, so that a Job still running at its deadline
// is gone before another cache's Job takes its place: what runs in the
// cluster stays within the caps.
func (s *settlement) release() {
	r, op := s.r, s.op
	gone := make([]client.ObjectKey, len(s.gone))
	for i, job := range s.gone {
		gone[i] = client.ObjectKey{Namespace: r.jobNamespace(s.cache, op, job), Name: job}
	}
	if !r.deleteJobs(s.ctx, gone) {
		op.sweep = true
	}
	for _, i := range s.settled {
		r.releaseJob(s.key, op, op.table.pairs[i].job)
	}
	r.settleHeld(s.key, op, s.settled)
	r.gaugeSlots()
	op.counts = op.table.counts()
}

// finalOf is the operation's final state once every pair is settled.
func finalOf(op *operation) *finalState {
	t := &op.table
	items := append([]results.Item{}, t.unstarted...)
	for i := range t.pairs {
		w := t.pairs[i].work
		items = append(items, results.Item{Image: w.Image, Node: w.Node.Name, Outcome: t.pairs[i].outcome})
	}
	return &finalState{items: items, summary: results.Summarise(items,
		results.Unrun{Present: t.present, Skipped: t.skipped, Lacking: op.lacking}, op.kind == plan.Purge)}
}

// deleteJobs deletes settled Jobs, their pods in the background, a few calls
// at a time, and says whether all went. A Job someone else deleted first is
// fine. One that could not be deleted now is deleted at the end of the
// operation; its result, already settled, is never read again.
func (r *Reconciler) deleteJobs(ctx context.Context, keys []client.ObjectKey) bool {
	if len(keys) == 0 {
		return true
	}
	failed, first := inParallel(len(keys), r.Config.WriteParallelism, func(i int) error {
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: keys[i].Namespace, Name: keys[i].Name}}
		return client.IgnoreNotFound(r.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)))
	})
	if first != nil {
		log.FromContext(ctx).Info("deleting settled jobs failed; the operation's end deletes them", "failed", failed, "error", first.Error())
	}
	return first == nil
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

// observe counts a settled pair in the metrics, and its Job unless that is
// a node Job (counted by observeJob).
func observe(kind jobs.Kind, o results.Outcome, nodeJob bool) {
	if !nodeJob {
		observeJob(kind, o)
	}
	if kind == jobs.Pull {
		pull := "succeeded"
		if o.State != results.Succeeded {
			pull = "failed"
		}
		metrics.ImagePulls.WithLabelValues(pull).Inc()
	}
}

// observeJob counts a Job whose result is known in the metrics.
func observeJob(kind jobs.Kind, o results.Outcome) {
	metrics.JobsFinished.WithLabelValues(string(kind), resultOf(o)).Inc()
}

// listPods returns the pods of the operation's Jobs, by Job name, in the
// namespaces its Jobs run in. It reads the informer cache, which holds only
// our Jobs' pods.
func (r *Reconciler) listPods(ctx context.Context, namespaces []string, opID string) map[string][]corev1.Pod {
	out := map[string][]corev1.Pod{}
	for _, ns := range namespaces {
		list := &corev1.PodList{}
		if err := r.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{jobs.LabelOperation: opID}, client.UnsafeDisableDeepCopy); err != nil {
			continue
		}
		for _, p := range list.Items {
			job := p.Labels[batchv1.JobNameLabel]
			if job == "" {
				job = p.Labels["job-name"]
			}
			out[job] = append(out[job], p)
		}
	}
	return out
}

// jobNamespace is where Job job of op runs (jobs.Namespace).
func (r *Reconciler) jobNamespace(cache *v1alpha2.ImageCache, op *operation, job string) string {
	kind := jobs.Pull
	if j := op.table.jobs[job]; j != nil {
		kind = op.table.pairs[j.pairs[0]].work.Kind
	}
	return jobs.Namespace(cache, kind, r.Config.Jobs)
}

// jobNamespaces are the namespaces the cache's Jobs run in: its own, and
// the controller's for the delete Jobs.
func (r *Reconciler) jobNamespaces(cache *v1alpha2.ImageCache) []string {
	if d := jobs.Namespace(cache, jobs.Delete, r.Config.Jobs); d != cache.Namespace {
		return []string{cache.Namespace, d}
	}
	return []string{cache.Namespace}
}

// eventsOfObjects reads the events of the named objects (our pods, a Job)
// straight from the API server (events are not cached: there are far too
// many). Errors only cost detail.
func (r *Reconciler) eventsOfObjects(ctx context.Context, ns string, names []string) []corev1.Event {
	var out []corev1.Event
	for _, name := range names {
		list := &corev1.EventList{}
		err := r.APIReader.List(ctx, list, client.InNamespace(ns),
			client.MatchingFieldsSelector{Selector: fields.SelectorFromSet(fields.Set{"involvedObject.name": name})})
		if err != nil {
			continue
		}
		out = append(out, list.Items...)
	}
	return out
}

func isAlreadyExists(err error) bool { return apierrors.IsAlreadyExists(err) }
