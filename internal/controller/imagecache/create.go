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
	failed := r.createAll(ctx, cache, op, todo)
	// The deadlines and the retries count from after the creates, which
	// may have taken a while.
	now = r.Clock.Now()
	t := r.recordCreates(key, op, todo, failed, now)
	r.gaugeSlots()
	r.settleHeld(key, op, t.failed)
	r.reportFailedCreates(ctx, cache, op, t)
	return r.scheduleRetry(ctx, op, t, now)
}

// createAll creates the Jobs, as many at once as the write parallelism
// allows, and returns the error of each that failed, by name.
func (r *Reconciler) createAll(ctx context.Context, cache *v1alpha2.ImageCache, op *operation, creates []*jobRecord) map[string]error {
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
	for k, j := range creates {
		if errs[k] == nil {
			metrics.JobsCreated.WithLabelValues(string(op.table.pairs[j.pairs[0]].work.Kind)).Inc()
		} else {
			failed[j.name] = errs[k]
		}
	}
	return failed
}

// buildJob builds Job j: a node Job of the pairs it was given when their
// slots were taken, or the Job of one pair.
func (r *Reconciler) buildJob(owner jobs.Owner, op *operation, j *jobRecord) (*batchv1.Job, error) {
	if !j.nodeJob {
		return jobs.Build(owner, op.table.pairs[j.pairs[0]].work, r.Config.Jobs)
	}
	return jobs.BuildNode(owner, op.workOf(j), r.Config.Jobs)
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
	// failed are the pairs settled as failed.
	failed []int
	// oldestRetry is when the oldest of the retried creates started
	// failing: it is settled once the pull deadline from there passes.
	oldestRetry time.Time
}

// recordCreates notes, per Job of todo, what its create came to: created
// (its pairs' deadline starts now), to be retried (its slots stay held,
// since the retry creates this very Job) or failed for good (its pairs
// settled, its slots freed).
func (r *Reconciler) recordCreates(key types.NamespacedName, op *operation, todo []*jobRecord, failed map[string]error, now time.Time) createTally {
	var t createTally
	for _, j := range todo {
		err := failed[j.name]
		if err == nil {
			op.table.created(j, now)
			r.limiter.Sent(windowKey(key, j.name), now)
			if op.nextDeadline.IsZero() {
				op.nextDeadline = now.Add(r.Config.Deadline)
			}
			continue
		}
		o, final := r.createFailure(j, err, now)
		if !final {
			t.retried += len(j.pairs)
			if t.firstRetry == nil {
				t.firstRetry = err
			}
			if t.oldestRetry.IsZero() || j.retry.first.Before(t.oldestRetry) {
				t.oldestRetry = j.retry.first
			}
			continue
		}
		r.failCreate(key, op, j, o, &t, err)
	}
	return t
}

// failCreate settles the pairs of Job j, whose create failed for good, as
// o says, and frees its slots.
func (r *Reconciler) failCreate(key types.NamespacedName, op *operation, j *jobRecord, o results.Outcome, t *createTally, err error) {
	if o.Expired {
		t.gaveUp += len(j.pairs)
	} else {
		t.refused += len(j.pairs)
	}
	if t.firstRefusal == nil {
		t.firstRefusal = err
	}
	j.retry = nil
	for _, i := range j.pairs {
		op.table.settle(i, o)
		t.failed = append(t.failed, i)
		observe(op.table.pairs[i].work.Kind, o, false)
	}
	r.releaseJob(key, op, j)
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
	if d := t.oldestRetry.Add(r.Config.Deadline).Sub(now); d < wait {
		wait = max(d, 0)
	}
	op.retryAt = now.Add(wait)
	log.FromContext(ctx).Info("job creates failed; retrying", "id", op.id, "failed", t.retried, "in", wait.String(), "error", t.firstRetry.Error())
	return max(wait, time.Millisecond)
}

// take lays out, as far as the pacing caps allow, the Jobs of the
// operation's pairs that have none yet (jobs.Layout, the limiter granting
// the slots), and returns the Jobs to create now and whether some pairs had
// to wait. A Job whose create is retried keeps the slots it took.
//
// A joining node's pairs go first, and its Jobs are granted as a joining
// node's (pacing.Limiter.TakeJoining): pods wait for that node now, and a
// node that joined a large operation would otherwise wait for the rest of
// it.
func (r *Reconciler) take(cache *v1alpha2.ImageCache, op *operation) ([]*jobRecord, bool) {
	key := client.ObjectKeyFromObject(cache)
	r.limiter.Overdue(r.Clock.Now())
	grant := func(node string, want, parallel int) (int, int) {
		if op.joining(node) {
			return r.limiter.TakeJoining(key, node, want, parallel)
		}
		return r.limiter.Take(key, node, want, parallel)
	}
	var planned []jobs.Planned
	waiting := false
	for run := range jobs.Chunks(op.joiningFirst(op.table.pending()), layoutRun) {
		p, w := jobs.Layout(cache.Name, op.id, run, r.Config.Granularity, grant)
		planned = append(planned, p...)
		waiting = waiting || w
		// Joining nodes' pairs come first, so past a node that is not
		// joining none is; and if no slot is left, no later pair gets one.
		if w && !op.joining(run[len(run)-1].Work.Node.Name) && r.limiter.Spent(key) {
			break
		}
	}
	return op.table.toCreate(op.table.lay(planned)), waiting
}

// layoutRun is about how many pending pairs take lays out before it looks
// whether any slot is left: more than a window's worth of node Jobs of ten
// images, few enough that a take with no slot reads a small part of a
// 50,000-pair operation.
const layoutRun = 256

// releaseJob gives back the slots of Job j once none of its pairs is left
// to settle: a node Job pulls until its last container has finished.
func (r *Reconciler) releaseJob(key types.NamespacedName, op *operation, j *jobRecord) {
	if !j.held || !op.table.done(j) {
		return
	}
	j.held = false
	r.limiter.Release(key, j.slots.node, j.slots.n)
	r.limiter.Gone(windowKey(key, j.name))
}

// windowKey names Job job of the cache key for the pacing window: Job names
// are unique only within a namespace.
func windowKey(key types.NamespacedName, job string) string { return key.String() + "/" + job }

// gaugeSlots sets the pacing gauges: the slots held, and the window that
// caps them.
func (r *Reconciler) gaugeSlots() {
	metrics.JobsInFlight.Set(float64(r.limiter.InFlight()))
	metrics.JobsWindow.Set(float64(r.limiter.Limit()))
}

// createFailure says what a failed create means for its pair: an outcome,
// and whether it is final. A refusal is final at once; any other error once
// creates have failed for as long as the pull deadline.
func (r *Reconciler) createFailure(j *jobRecord, err error, now time.Time) (results.Outcome, bool) {
	reason := string(apierrors.ReasonForError(err))
	if errors.As(err, &buildError{}) {
		return results.Outcome{State: results.Failed, Reason: "JobInvalid", Message: truncate(err.Error())}, true
	}
	if cachestatus.RefusedForGood(err) {
		return results.Outcome{State: results.Failed, Reason: nonEmpty(reason, "JobCreateRefused"),
			Message: truncate("the API server refused the Job: " + err.Error())}, true
	}
	if j.retry == nil {
		j.retry = &createRetry{first: now}
	}
	j.retry.last = err
	if now.Sub(j.retry.first) < r.Config.Deadline {
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
