package imagecache

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/metrics"
	"github.com/kubefledged/kube-fledged/internal/plan"
	"github.com/kubefledged/kube-fledged/internal/results"
)

// start begins an operation: it clears the Jobs of the cache's previous
// operation, plans the work, records Processing and creates the first Jobs.
// only restricts a NewNodes operation to those nodes.
func (r *Reconciler) start(ctx context.Context, cache *v1alpha2.ImageCache, kind plan.Operation, only map[string]bool) (ctrl.Result, error) {
	logger := log.FromContext(ctx).WithValues("operation", kind)

	// A cache keeps only the Jobs of its latest operation: retained Jobs of
	// the previous one go now, before any new Job exists. Under the delete
	// policy none is left: each operation deleted its own before it ended,
	// and a restart's clean-up deleted those of an operation cut short.
	if r.Config.Retain {
		if err := r.Client.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(cache.Namespace),
			client.MatchingLabels{jobs.LabelCacheUID: string(cache.UID)},
			client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
			return ctrl.Result{}, fmt.Errorf("deleting the previous operation's jobs: %w", err)
		}
	}

	nodes, err := r.listNodes(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	p := plan.Build(plan.Input{
		Op: kind, Spec: cache.Spec, Prior: cache.Status.ProcessedSpec,
		Nodes: nodes.Items, AlwaysPull: r.Config.AlwaysPull, Only: only,
	})

	now := r.Clock.Now()
	eligible := plan.EligibleNodes(&cache.Spec, nodes.Items)
	op := &operation{
		id: newOperationID(), kind: kind, uid: cache.UID, generation: cache.Generation,
		spec: *cache.Spec.DeepCopy(), start: now, eligible: eligible, only: only,
		priorCoverage: plan.ExistedAt(nodes.Items, eligible, cache.Status.StartTime),
		index:         map[string]int{}, createdAt: map[string]time.Time{}, holding: map[string]string{}, settled: map[string]results.Outcome{},
		unseen: map[string]bool{}, joined: map[string]bool{},
		present: p.Present, desired: p.Desired, skipped: p.Skipped, unmatched: p.Unmatched,
	}
	for img, why := range p.Invalid {
		op.unstarted = append(op.unstarted, results.Item{Image: img, Node: "(all nodes)",
			Outcome: results.Outcome{State: results.Failed, Reason: "InvalidImageName", Message: why}})
	}
	r.addWork(cache, op, p.Work)
	if kind != plan.Purge {
		metrics.ImagePulls.WithLabelValues("already_present").Add(float64(op.present))
	}
	op.counts = countsOf(op, 0, len(op.work))

	st := &cache.Status
	st.Status = v1alpha2.ImageCacheActionStatusProcessing
	st.Reason = string(kind)
	st.Message = v1alpha2.ImageCacheMessagePullingImages
	if op.deleting() {
		st.Message = v1alpha2.ImageCacheMessageDeletingImages
	}
	if kind == plan.NewNodes {
		st.Message = "Images are being pulled on to new nodes: " + nodeList(only)
	}
	t := metav1.NewTime(now)
	st.StartTime = &t
	st.CompletionTime = nil
	st.Failures = nil
	st.FailuresOmitted = 0
	st.Counts = op.counts.DeepCopy()
	st.Progress = progress(op.counts)
	setConditions(cache, true, string(kind), st.Message)
	// The resourceVersion of our read guards this write: on a stale read it
	// conflicts and nothing has started.
	if err := r.Client.Status().Update(ctx, cache); err != nil {
		return ctrl.Result{}, err
	}
	op.written, op.lastWrite = op.counts, now
	r.ops.put(client.ObjectKeyFromObject(cache), op)
	logger.Info("operation started", "id", op.id, "jobs", len(op.work), "alreadyPresent", op.present,
		"skippedNodes", op.skipped, "failedUnstarted", len(op.unstarted))
	r.Recorder.Event(cache, corev1.EventTypeNormal, string(kind), st.Message)
	for _, why := range p.Unmatched {
		r.Recorder.Event(cache, corev1.EventTypeWarning, "NoMatchingNodes", why)
	}
	return r.progress(ctx, cache, op)
}

// addWork adds work items to an operation, each under its fixed Job name. A
// delete on a node whose runtime we cannot reach fails at once, without a
// Job.
func (r *Reconciler) addWork(cache *v1alpha2.ImageCache, op *operation, work []jobs.Work) {
	// Grown once: appending 10,000 items one by one left up to twice their
	// size allocated for the operation's whole life.
	op.work = slices.Grow(op.work, len(work))
	op.names = slices.Grow(op.names, len(work))
	for _, w := range work {
		if w.Kind == jobs.Delete && r.Config.Jobs.CRISocketPath == "" {
			if _, err := jobs.DefaultSocket(w.Node.Runtime); err != nil {
				op.unstarted = append(op.unstarted, results.Item{Image: w.Image, Node: w.Node.Name,
					Outcome: results.Outcome{State: results.Failed, Reason: "UnsupportedRuntime", Message: err.Error()}})
				continue
			}
		}
		name := jobs.Name(cache.Name, op.id, w)
		op.index[name] = len(op.work)
		op.work = append(op.work, w)
		op.names = append(op.names, name)
	}
}

// extend adds to a running operation the nodes that became eligible since it
// started: they get every image of the operation's spec, as a new-nodes
// operation would give them, but now, not once the operation has ended (a
// large operation runs for minutes). A purge wants nothing on new nodes.
func (r *Reconciler) extend(ctx context.Context, cache *v1alpha2.ImageCache, op *operation) error {
	if op.kind == plan.Purge || op.final != nil {
		return nil
	}
	nodes, err := r.listNodes(ctx)
	if err != nil {
		return err
	}
	joined := map[string]bool{}
	for n := range plan.EligibleNodes(&op.spec, nodes.Items) {
		if !op.eligible[n] {
			joined[n] = true
		}
	}
	if len(joined) == 0 {
		return nil
	}
	p := plan.Build(plan.Input{Op: plan.NewNodes, Spec: op.spec, Nodes: nodes.Items, AlwaysPull: r.Config.AlwaysPull, Only: joined})
	for n := range joined {
		op.eligible[n] = true
		op.joined[n] = true
	}
	// Invalid images were reported for all nodes when the operation started.
	op.present += p.Present
	op.desired += p.Desired
	op.skipped += p.Skipped
	before := len(op.work)
	r.addWork(cache, op, p.Work)
	log.FromContext(ctx).Info("nodes joined the running operation", "id", op.id, "nodes", nodeList(joined), "jobs", len(op.work)-before)
	r.Recorder.Event(cache, corev1.EventTypeNormal, string(plan.NewNodes), "Images are being pulled on to new nodes: "+nodeList(joined))
	return nil
}

// createJobs creates the Jobs of the operation that are not created yet, as
// far as the pacing caps allow. Names are fixed, so AlreadyExists means an
// earlier attempt succeeded.
func (r *Reconciler) createJobs(ctx context.Context, cache *v1alpha2.ImageCache, op *operation) error {
	key := client.ObjectKeyFromObject(cache)
	var todo []int
	waiting := false
	for i, name := range op.names {
		if _, ok := op.createdAt[name]; ok {
			continue
		}
		if _, ok := op.holding[name]; !ok {
			if !r.limiter.TryAcquire(key, op.work[i].Node.Name) {
				waiting = true
				continue
			}
			op.holding[name] = op.work[i].Node.Name
		}
		todo = append(todo, i)
	}
	if !waiting {
		r.limiter.Forget(key)
	}
	if len(todo) == 0 {
		return nil
	}
	owner := jobs.Owner{Cache: cache, Operation: op.id}
	created := make([]bool, len(todo))
	failed, firstErr := inParallel(len(todo), r.Config.CreateParallelism, func(k int) error {
		job, err := jobs.Build(owner, op.work[todo[k]], r.Config.Jobs)
		if err != nil {
			return err
		}
		if err := r.Client.Create(ctx, job); err != nil && !isAlreadyExists(err) {
			return err
		}
		created[k] = true
		return nil
	})
	for k, i := range todo {
		if !created[k] {
			continue // the slot stays held: the retry creates this very Job
		}
		name := op.names[i]
		now := r.Clock.Now()
		op.createdAt[name] = now
		op.unseen[name] = true
		if op.nextDeadline.IsZero() {
			op.nextDeadline = now.Add(r.Config.Deadline)
		}
		metrics.JobsCreated.WithLabelValues(string(op.work[i].Kind)).Inc()
	}
	metrics.JobsInFlight.Set(float64(r.limiter.InFlight()))
	if firstErr != nil {
		return fmt.Errorf("creating %d of %d jobs failed (retrying): %w", failed, len(todo), firstErr)
	}
	return nil
}

func nodeList(nodes map[string]bool) string {
	var names []string
	for n := range nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) > 10 {
		return strings.Join(names[:10], ", ") + fmt.Sprintf(" and %d more", len(names)-10)
	}
	return strings.Join(names, ", ")
}

func metav1Time(t time.Time) metav1.Time { return metav1.NewTime(t) }
