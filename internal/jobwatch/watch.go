// Package jobwatch keeps what the controller must know of its running Jobs:
// which cache each one wakes, and how it ended. It is an informer of its own
// rather than controller-runtime's cache because that cache can only hold a
// batchv1.Job, which is 1.3 KB with its spec emptied. At 1000 nodes × 10
// images with caps that do not bind, 8,000 Jobs run at once, and those empty
// specs were the largest part of the controller's heap. A Job here is its
// identity, its controller, when the Job controller started it (the pacing
// window's measure) and its conditions: about 300 bytes.
package jobwatch

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/kubefledged/kube-fledged/internal/jobs"
)

// Job is the record kept of one Job. It is a client.Object, so that
// controller-runtime's event handlers (owner references, the controller)
// take it as they would the Job.
type Job struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	StartTime         *metav1.Time           `json:"startTime,omitempty"`
	Conditions        []batchv1.JobCondition `json:"conditions,omitempty"`
}

// DeepCopyObject copies the record; the informer's handlers never write to
// it, but runtime.Object asks for it.
func (j *Job) DeepCopyObject() runtime.Object {
	out := &Job{TypeMeta: j.TypeMeta, StartTime: j.StartTime.DeepCopy()}
	j.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if j.Conditions != nil {
		out.Conditions = make([]batchv1.JobCondition, len(j.Conditions))
		for i := range j.Conditions {
			j.Conditions[i].DeepCopyInto(&out.Conditions[i])
		}
	}
	return out
}

// AsJob is the record as the Job it came from, with what was dropped left
// empty: results are read from a Job's conditions alone.
func (j *Job) AsJob() *batchv1.Job {
	return &batchv1.Job{ObjectMeta: j.ObjectMeta, Status: batchv1.JobStatus{StartTime: j.StartTime, Conditions: j.Conditions}}
}

// Record turns a Job from the watch into the record kept of it; anything
// else (a tombstone) passes through.
func Record(obj any) (any, error) {
	j, ok := obj.(*batchv1.Job)
	if !ok {
		return obj, nil
	}
	rec := &Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: j.Name, Namespace: j.Namespace, UID: j.UID, ResourceVersion: j.ResourceVersion,
			OwnerReferences:   j.OwnerReferences,
			CreationTimestamp: j.CreationTimestamp, DeletionTimestamp: j.DeletionTimestamp,
		},
		StartTime:  j.Status.StartTime,
		Conditions: j.Status.Conditions,
	}
	// A delete Job in the controller's namespace has no owner: this
	// annotation names its cache.
	if c, ok := j.Annotations[jobs.AnnotationCache]; ok {
		rec.Annotations = map[string]string{jobs.AnnotationCache: c}
	}
	return rec, nil
}

// Watch is the informer of the Jobs that carry the controller's labels, in
// every namespace.
type Watch struct {
	informer toolscache.SharedIndexInformer
}

// New watches the Jobs selected by selector.
func New(cs kubernetes.Interface, selector labels.Selector) *Watch {
	lw := toolscache.NewFilteredListWatchFromClient(cs.BatchV1().RESTClient(), "jobs", metav1.NamespaceAll,
		func(o *metav1.ListOptions) { o.LabelSelector = selector.String() })
	inf := toolscache.NewSharedIndexInformer(lw, &batchv1.Job{}, 0, toolscache.Indexers{})
	// Only fails once the informer has started.
	_ = inf.SetTransform(Record)
	return &Watch{informer: inf}
}

// Start runs the informer until ctx ends. Every replica runs it, leader or
// not, as controller-runtime runs its caches: a new leader starts with its
// Jobs already known.
func (w *Watch) Start(ctx context.Context) error {
	w.informer.Run(ctx.Done())
	return nil
}

// NeedLeaderElection is false: see Start.
func (w *Watch) NeedLeaderElection() bool { return false }

// Get returns the Job ns/name as last seen, or nil if the informer does not
// hold it. Nothing may write to what it returns.
func (w *Watch) Get(ns, name string) *batchv1.Job {
	obj, ok, err := w.informer.GetIndexer().GetByKey(ns + "/" + name)
	if err != nil || !ok {
		return nil
	}
	j, ok := obj.(*Job)
	if !ok {
		return nil
	}
	return j.AsJob()
}

// Source feeds the Jobs' events to a controller through h. The controller
// waits for the informer to sync before its first reconcile, as it does for
// its own caches: settling must not take a Job it has not seen yet for one
// that is gone.
func (w *Watch) Source(h handler.EventHandler) source.SyncingSource {
	return syncing{Informer: &source.Informer{Informer: w.informer, Handler: h}, synced: w.informer.HasSynced}
}

type syncing struct {
	*source.Informer
	synced func() bool
}

func (s syncing) WaitForSync(ctx context.Context) error {
	if !toolscache.WaitForCacheSync(ctx.Done(), s.synced) {
		return fmt.Errorf("jobs not synced: %w", ctx.Err())
	}
	return nil
}

var (
	_ manager.Runnable               = &Watch{}
	_ manager.LeaderElectionRunnable = &Watch{}
	_ toolscache.TransformFunc       = Record
)
