package framework

import (
	"context"
	"slices"
	"sync"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kubefledged/kube-fledged/internal/jobs"
)

// JobEvent is one change to a Job as the API server reported it.
type JobEvent struct {
	Type watch.EventType // watch.Added, watch.Modified or watch.Deleted
	Job  batchv1.Job
}

// JobLog records the Jobs a test's operations create, change and delete. With the delete
// retention policy a Job can vanish before a test could list it, so the watch's events are
// what a test counts, not what the cluster holds at the end.
type JobLog struct {
	mu     sync.Mutex
	events []JobEvent
}

// RecordJobs starts a JobLog on the Jobs of namespace ns ("" for every namespace) that
// match selector (nil for all), until the test ends. Jobs that exist already are not
// recorded: the watch starts at the resource version of a list, so a log started
// beside a predecessor's leftovers sees only what happens to them from then on.
func RecordJobs(t testing.TB, kube kubernetes.Interface, ns string, selector labels.Set) *JobLog {
	t.Helper()
	opts := metav1.ListOptions{LabelSelector: labels.SelectorFromSet(selector).String()}
	l, err := kube.BatchV1().Jobs(ns).List(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.ResourceVersion = l.ResourceVersion
	w, err := kube.BatchV1().Jobs(ns).Watch(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	log := &JobLog{}
	go func() {
		for ev := range w.ResultChan() {
			if j, ok := ev.Object.(*batchv1.Job); ok {
				log.mu.Lock()
				log.events = append(log.events, JobEvent{Type: ev.Type, Job: *j})
				log.mu.Unlock()
			}
		}
	}()
	return log
}

// Events returns what the log holds, in the order the API server reported it.
func (l *JobLog) Events() []JobEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

// Created returns the Jobs created since the last Take, as they were when created.
func (l *JobLog) Created() []batchv1.Job {
	var out []batchv1.Job
	for _, ev := range l.Events() {
		if ev.Type == watch.Added {
			out = append(out, ev.Job)
		}
	}
	return out
}

// Take returns the Work of each Job created since the last Take, and forgets every event
// so far: a test that runs operations one after the other checks each one's Jobs.
func (l *JobLog) Take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, ev := range l.events {
		if ev.Type == watch.Added {
			out = append(out, Work(ev.Job)...)
		}
	}
	l.events = nil
	return out
}

// Work is "kind image node" for each image a Job of ours works on: one for a Job per
// (image, node), one per container for a node's pull Job, so that the same list compares
// equal at either pull-Job granularity.
func Work(j batchv1.Job) []string {
	var out []string
	for _, img := range jobs.ImagesOf(&j) {
		out = append(out, j.Labels[jobs.LabelKind]+" "+img+" "+j.Annotations[jobs.AnnotationNode])
	}
	return out
}
