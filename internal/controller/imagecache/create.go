package imagecache

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/controller/cachestatus"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/metrics"
	"github.com/kubefledged/kube-fledged/internal/results"
)

// Backoff between retries of Job creates that failed for a reason that may
// pass (a timeout, a conflict, throttling, a webhook that is down).
const (
	createBackoffMin = 500 * time.Millisecond
	createBackoffMax = 10 * time.Second
)

// createRetry is a Job whose create failed for a reason that may pass.
type createRetry struct {
	// first is when its creates started failing: they are retried until
	// the pull deadline from there, never longer.
	first time.Time
	last  error
}

// createJobs creates the Jobs of the operation that are not created yet, as
// far as the pacing caps allow. Names are fixed, so AlreadyExists means an
// earlier attempt succeeded. A create refused for good (a quota, an
// admission policy, RBAC) settles its pair as failed with the API's answer
// and frees its slot: today's refusal would be tomorrow's too, and a slot held
// for it would keep other caches' Jobs off the node. Other errors are
// retried, with backoff, until the pull deadline. It returns how long until
// the next retry is due (0: none).
func (r *Reconciler) createJobs(ctx context.Context, cache *v1alpha2.ImageCache, op *operation) time.Duration {
	key := client.ObjectKeyFromObject(cache)
	now := r.Clock.Now()
	if now.Before(op.retryAt) {
		return op.retryAt.Sub(now)
	}
	todo, waiting := r.take(cache, op)
	if !waiting {
		r.limiter.Forget(key)
	}
	if len(todo) == 0 {
		return 0
	}
	failed := r.createAll(ctx, cache, op, jobsOf(op, todo))
	// The deadlines and the retries count from after the creates, which
	// may have taken a while.
	now = r.Clock.Now()
	t := r.recordCreates(key, op, todo, failed, now)
	metrics.JobsInFlight.Set(float64(r.limiter.InFlight()))
	r.settleHeld(key, op, t.failedNames)
	r.reportFailedCreates(ctx, cache, op, t)
	return r.scheduleRetry(ctx, op, t, now)
}

// createAll creates the named Jobs, as many at once as the write
// parallelism allows, and returns the error of each that failed.
func (r *Reconciler) createAll(ctx context.Context, cache *v1alpha2.ImageCache, op *operation, creates []string) map[string]error {
	owner := jobs.Owner{Cache: cache, Operation: op.id, PullUser: op.pullUser, Unpin: r.unpins(cache)}
	errs := make([]error, len(creates))
	_, _ = inParallel(len(creates), r.Config.WriteParallelism, func(k int) error {
		job, err := r.buildJob(owner, op, creates[k])
		if err != nil {
			err = buildError{err}
		} else {
			err = r.Client.Create(ctx, job)
		}
		if isAlreadyExists(err) {
			err = nil
		}
		errs[k] = err
		return err
	})
	failed := make(map[string]error, len(creates))
	for k, job := range creates {
		if errs[k] == nil {
			op.unseen[job] = true
			metrics.JobsCreated.WithLabelValues(string(op.work[op.pairs(job)[0]].Kind)).Inc()
		} else {
			failed[job] = errs[k]
		}
	}
	return failed
}

// buildJob builds Job job: a node Job of the pairs it was given when their
// slots were taken, or the Job of one pair.
func (r *Reconciler) buildJob(owner jobs.Owner, op *operation, job string) (*batchv1.Job, error) {
	if !op.nodeJob(job) {
		return jobs.Build(owner, op.work[op.index[job]], r.Config.Jobs)
	}
	return jobs.BuildNode(owner, op.workOf(op.pairs(job)), r.Config.Jobs)
}

// createTally is what one round of creates came to, for its Events, logs
// and retry.
type createTally struct {
	// refused and gaveUp count the pairs whose creates failed for good,
	// refused at once or failing until the pull deadline; firstRefusal is
	// the first of their errors. retried counts those tried again later,
	// firstRetry the first of their errors.
	refused, gaveUp, retried int
	firstRefusal, firstRetry error
	// failedNames are the pairs settled as failed.
	failedNames []string
}

// recordCreates notes, per pair of todo, what the create of its Job came
// to: created (its deadline starts now), to be retried (its slot stays
// held, since the retry creates this very Job) or failed for good (settled,
// its slot freed).
func (r *Reconciler) recordCreates(key types.NamespacedName, op *operation, todo []int, failed map[string]error, now time.Time) createTally {
	var t createTally
	for _, i := range todo {
		name := op.names[i]
		err := failed[op.job(name)]
		if err == nil {
			delete(op.retrying, name)
			op.createdAt[name] = now
			if op.nextDeadline.IsZero() {
				op.nextDeadline = now.Add(r.Config.Deadline)
			}
			continue
		}
		o, final := r.createFailure(op, name, err, now)
		if !final {
			t.retried++
			if t.firstRetry == nil {
				t.firstRetry = err
			}
			continue
		}
		if o.Expired {
			t.gaveUp++
		} else {
			t.refused++
		}
		if t.firstRefusal == nil {
			t.firstRefusal = err
		}
		delete(op.retrying, name)
		op.settled[name] = o
		t.failedNames = append(t.failedNames, name)
		op.failedCreates++
		observe(op.work[i].Kind, o, false)
		r.releaseJob(key, op, op.job(name))
	}
	return t
}

// reportFailedCreates tells the user, by Event, of the pairs that failed
// for want of a Job: their status entry says why for each, the Event says
// that the API server, not the image, was the cause.
func (r *Reconciler) reportFailedCreates(ctx context.Context, cache *v1alpha2.ImageCache, op *operation, t createTally) {
	if t.refused+t.gaveUp > 0 {
		log.FromContext(ctx).Info("job creates failed for good; their pairs fail", "id", op.id, "refused", t.refused, "gaveUp", t.gaveUp, "error", t.firstRefusal.Error())
	}
	if t.refused > 0 {
		r.Recorder.Event(cache, corev1.EventTypeWarning, "JobCreateRefused",
			fmt.Sprintf("%d Job(s) refused by the API server, their images fail on their nodes: %v", t.refused, t.firstRefusal))
	}
	if t.gaveUp > 0 {
		r.Recorder.Event(cache, corev1.EventTypeWarning, "JobCreateFailed",
			fmt.Sprintf("%d Job(s) could not be created within the pull deadline, their images fail on their nodes: %v", t.gaveUp, t.firstRefusal))
	}
}

// scheduleRetry sets when the creates that failed for a reason that may
// pass are tried again, doubling the wait each round, and returns the wait
// (0: nothing to retry).
func (r *Reconciler) scheduleRetry(ctx context.Context, op *operation, t createTally, now time.Time) time.Duration {
	if t.retried == 0 {
		op.backoff, op.retryAt = 0, time.Time{}
		return 0
	}
	op.backoff = min(max(op.backoff*2, createBackoffMin), createBackoffMax)
	wait := op.backoff
	// Never past the deadline of the oldest failing create: it is settled then.
	for _, rt := range op.retrying {
		if d := rt.first.Add(r.Config.Deadline).Sub(now); d < wait {
			wait = max(d, 0)
		}
	}
	op.retryAt = now.Add(wait)
	log.FromContext(ctx).Info("job creates failed; retrying", "id", op.id, "failed", t.retried, "in", wait.String(), "error", t.firstRetry.Error())
	return max(wait, time.Millisecond)
}

// take takes the pacing slots of the operation's Jobs not created yet, as
// far as the caps allow, and returns their pairs (in the order they took
// them) and whether some had to wait. A Job whose create is retried keeps
// the slots it took. Per (image, node), or for a delete, a pair's Job is
// its own and takes one slot. Per node, a node's pulls that have no Job yet
// are put in Jobs of at most jobs.MaxContainers, each sized and counted by
// the limiter: with the kubelet pulling a pod's images one at a time, a Job
// of all the node's images holds one slot.
func (r *Reconciler) take(cache *v1alpha2.ImageCache, op *operation) ([]int, bool) {
	key := client.ObjectKeyFromObject(cache)
	var todo []int
	waiting := false
	fresh := map[string][]int{}
	var nodes []string
	for _, i := range op.order {
		name := op.names[i]
		if _, ok := op.createdAt[name]; ok {
			continue
		}
		if _, ok := op.settled[name]; ok {
			continue
		}
		if _, ok := op.holding[op.job(name)]; ok {
			todo = append(todo, i)
			continue
		}
		w := op.work[i]
		if r.perNode() && w.Kind == jobs.Pull {
			if _, ok := fresh[w.Node.Name]; !ok {
				nodes = append(nodes, w.Node.Name)
			}
			fresh[w.Node.Name] = append(fresh[w.Node.Name], i)
			continue
		}
		n, s := r.limiter.Take(key, w.Node.Name, 1, 1)
		if n == 0 {
			waiting = true
			continue
		}
		op.holding[name] = slots{node: w.Node.Name, n: s}
		todo = append(todo, i)
	}
	for _, node := range nodes {
		taken, full := r.takeNodeJobs(cache, op, node, fresh[node])
		todo = append(todo, taken...)
		waiting = waiting || full
	}
	return todo, waiting
}

// takeNodeJobs puts node's pulls ps, which have no Job yet, in node Jobs
// as the caps allow, and returns the pairs that got one and whether some
// had to wait. A Job's pairs are fixed here, once: a retried create must
// make the very same Job.
func (r *Reconciler) takeNodeJobs(cache *v1alpha2.ImageCache, op *operation, node string, ps []int) ([]int, bool) {
	key := client.ObjectKeyFromObject(cache)
	var todo []int
	for len(ps) > 0 {
		n, s := r.limiter.Take(key, node, min(len(ps), jobs.MaxContainers), op.work[ps[0]].Node.Parallel)
		if n == 0 {
			return todo, true
		}
		chunk := ps[:n:n]
		ps = ps[n:]
		job := jobs.NodeJobName(cache.Name, op.id, op.workOf(chunk))
		op.pairsOf[job] = chunk
		for _, i := range chunk {
			op.jobOf[op.names[i]] = job
		}
		op.holding[job] = slots{node: node, n: s}
		todo = append(todo, chunk...)
	}
	return todo, false
}

// jobsOf names the Jobs that do the pairs todo, each once.
func jobsOf(op *operation, todo []int) []string {
	var out []string
	seen := map[string]bool{}
	for _, i := range todo {
		job := op.job(op.names[i])
		if !seen[job] {
			seen[job] = true
			out = append(out, job)
		}
	}
	return out
}

// releaseJob gives back the slots of job once none of its pairs is left
// to settle: a node Job pulls until its last container has finished.
func (r *Reconciler) releaseJob(key types.NamespacedName, op *operation, job string) {
	s, ok := op.holding[job]
	if !ok {
		return
	}
	for _, i := range op.pairs(job) {
		if _, done := op.settled[op.names[i]]; !done {
			return
		}
	}
	delete(op.holding, job)
	r.limiter.Release(key, s.node, s.n)
}

// createFailure says what a failed create means for its pair: an outcome,
// and whether it is final. A refusal is final at once; any other error once
// creates have failed for as long as the pull deadline.
func (r *Reconciler) createFailure(op *operation, name string, err error, now time.Time) (results.Outcome, bool) {
	reason := string(apierrors.ReasonForError(err))
	if errors.As(err, &buildError{}) {
		return results.Outcome{State: results.Failed, Reason: "JobInvalid", Message: truncate(err.Error())}, true
	}
	if cachestatus.RefusedForGood(err) {
		return results.Outcome{State: results.Failed, Reason: nonEmpty(reason, "JobCreateRefused"),
			Message: truncate("the API server refused the Job: " + err.Error())}, true
	}
	rt, ok := op.retrying[name]
	if !ok {
		rt.first = now
	}
	rt.last = err
	op.retrying[name] = rt
	if now.Sub(rt.first) < r.Config.Deadline {
		return results.Outcome{}, false
	}
	return results.Outcome{State: results.Failed, Expired: true, Reason: nonEmpty(reason, "JobCreateFailed"),
		Message: truncate(fmt.Sprintf("creating the Job failed for %s, the pull deadline: %v", r.Config.Deadline, err))}, true
}

// buildError is a Job we could not build: the same work would fail the same
// way on every retry.
type buildError struct{ error }

func (e buildError) Unwrap() error { return e.error }

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// truncate bounds a message taken from the API: an admission webhook may
// answer at any length, and it lands in the cache's status.
func truncate(s string) string {
	if len(s) <= results.MaxMessage {
		return s
	}
	return s[:results.MaxMessage-3] + "..."
}
