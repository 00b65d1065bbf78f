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
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/plan"
	"github.com/kubefledged/kube-fledged/internal/results"
)

// start begins an operation: it clears the Jobs of the cache's previous
// operation, plans the work, records Processing and creates the Jobs.
func (r *Reconciler) start(ctx context.Context, cache *v1alpha2.ImageCache, kind plan.Operation) (ctrl.Result, error) {
	logger := log.FromContext(ctx).WithValues("operation", kind)

	// A cache keeps only the Jobs of its latest operation: retained Jobs of
	// the previous one go now, before any new Job exists.
	if err := r.Client.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(cache.Namespace),
		client.MatchingLabels{jobs.LabelCacheUID: string(cache.UID)},
		client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		return ctrl.Result{}, fmt.Errorf("deleting the previous operation's jobs: %w", err)
	}

	nodes := &corev1.NodeList{}
	if err := r.Client.List(ctx, nodes); err != nil {
		return ctrl.Result{}, err
	}
	p := plan.Build(plan.Input{
		Op: kind, Spec: cache.Spec, Prior: cache.Status.ProcessedSpec,
		Nodes: nodes.Items, AlwaysPull: r.Config.AlwaysPull,
	})

	now := r.Clock.Now()
	op := &operation{
		id: newOperationID(), kind: kind, uid: cache.UID, generation: cache.Generation,
		spec: *cache.Spec.DeepCopy(), start: now, deadline: now.Add(r.Config.Deadline),
		created: map[string]bool{}, present: p.Present,
	}
	for img, why := range p.Invalid {
		op.unstarted = append(op.unstarted, results.Item{Image: img, Node: "(all nodes)",
			Outcome: results.Outcome{State: results.Failed, Reason: "InvalidImageName", Message: why}})
	}
	for _, w := range p.Work {
		if w.Kind == jobs.Delete && r.Config.Jobs.CRISocketPath == "" {
			if _, err := jobs.DefaultSocket(w.Node.Runtime); err != nil {
				op.unstarted = append(op.unstarted, results.Item{Image: w.Image, Node: w.Node.Name,
					Outcome: results.Outcome{State: results.Failed, Reason: "UnsupportedRuntime", Message: err.Error()}})
				continue
			}
		}
		op.work = append(op.work, w)
		op.names = append(op.names, jobs.Name(cache.Name, op.id, w))
	}

	cache.Status.Status = v1alpha2.ImageCacheActionStatusProcessing
	cache.Status.Reason = string(kind)
	cache.Status.Message = v1alpha2.ImageCacheMessagePullingImages
	if op.deleting() {
		cache.Status.Message = v1alpha2.ImageCacheMessageDeletingImages
	}
	t := metav1.NewTime(now)
	cache.Status.StartTime = &t
	cache.Status.CompletionTime = nil
	cache.Status.Failures = nil
	// The resourceVersion of our read guards this write: on a stale read it
	// conflicts and nothing has started.
	if err := r.Client.Status().Update(ctx, cache); err != nil {
		return ctrl.Result{}, err
	}
	key := types.NamespacedName{Namespace: cache.Namespace, Name: cache.Name}
	r.ops.put(key, op)
	logger.Info("operation started", "id", op.id, "jobs", len(op.work), "alreadyPresent", op.present, "failedUnstarted", len(op.unstarted))
	r.Recorder.Event(cache, corev1.EventTypeNormal, string(kind), cache.Status.Message)
	return r.progress(ctx, cache, op)
}

// createJobs creates every Job of the operation not yet known to exist.
// Names are fixed, so AlreadyExists means an earlier attempt succeeded.
func (r *Reconciler) createJobs(ctx context.Context, cache *v1alpha2.ImageCache, op *operation) error {
	type result struct {
		name string
		err  error
	}
	var todo []int
	for i, name := range op.names {
		if !op.created[name] {
			todo = append(todo, i)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	owner := jobs.Owner{Cache: cache, Operation: op.id}
	sem := make(chan struct{}, r.Config.CreateParallelism)
	out := make(chan result, len(todo))
	for _, i := range todo {
		sem <- struct{}{}
		go func(i int) {
			defer func() { <-sem }()
			job, err := jobs.Build(owner, op.work[i], r.Config.Jobs)
			if err == nil {
				err = r.Client.Create(ctx, job)
				if err != nil && isAlreadyExists(err) {
					err = nil
				}
			}
			out <- result{name: op.names[i], err: err}
		}(i)
	}
	var firstErr error
	failed := 0
	for range todo {
		res := <-out
		if res.err != nil {
			failed++
			if firstErr == nil {
				firstErr = res.err
			}
			continue
		}
		op.created[res.name] = true
	}
	if firstErr != nil {
		return fmt.Errorf("creating %d of %d jobs failed (retrying): %w", failed, len(todo), firstErr)
	}
	return nil
}

func metav1Time(t time.Time) metav1.Time { return metav1.NewTime(t) }
