package framework

import (
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	gomegatypes "github.com/onsi/gomega/types"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kubefledged/kube-fledged/internal/jobs"
)

// JobEvent is one change to a Job as the API server reported it.
type JobEvent struct {
	Type watch.EventType // watch.Added, watch.Modified or watch.Deleted
	Job  batchv1.Job
	At   time.Time // when the log got it: finer than the API's whole-second timestamps
}

// JobLog records the Jobs a test's operations create, change and delete. With the delete
// retention policy a Job can vanish before a test could list it, so the events are what
// a test counts, not what the cluster holds at the end. It follows the Jobs through an
// informer, so it outlives restarts of the API server and etcd: what changed while they
// were away shows once it has listed again (but for a Job created and deleted wholly
// within the gap).
type JobLog struct {
	mu     sync.Mutex
	events []JobEvent
	taken  int // events before this one were handed out by Take
	subs   []chan JobEvent
	// keep, when set, drops the Jobs it refuses.
	keep func(*batchv1.Job) bool
}

// RecordJobs starts a JobLog on the Jobs of namespace ns ("" for every namespace) that
// match selector (nil for all), until the test ends. Jobs that exist already are not
// recorded as created: a log started beside a predecessor's leftovers sees only what
// happens to them from then on.
func RecordJobs(t testing.TB, kube kubernetes.Interface, ns string, selector labels.Set) *JobLog {
	t.Helper()
	return recordJobs(t, kube, ns, selector, nil)
}

// RecordCacheJobs is RecordJobs of every Job of the caches of namespace ns: those in ns, and
// their delete Jobs, which run in the controller's namespace.
func RecordCacheJobs(t testing.TB, kube kubernetes.Interface, ns string) *JobLog {
	t.Helper()
	return recordJobs(t, kube, "", nil, func(j *batchv1.Job) bool {
		return j.Namespace == ns || j.Labels[jobs.LabelCacheNamespace] == ns
	})
}

func recordJobs(t testing.TB, kube kubernetes.Interface, ns string, selector labels.Set, keep func(*batchv1.Job) bool) *JobLog {
	t.Helper()
	api := kube.BatchV1().Jobs(ns)
	l := &JobLog{keep: keep}
	InformTest(t, kube, api.List, api.Watch, labels.SelectorFromSet(selector).String(), &batchv1.Job{}, l.record)
	return l
}

func (l *JobLog) record(typ watch.EventType, j *batchv1.Job, initial bool) {
	if initial || (l.keep != nil && !l.keep(j)) {
		return
	}
	ev := JobEvent{Type: typ, Job: *j, At: time.Now()}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, ev)
	for _, s := range l.subs {
		select {
		case s <- ev:
		default: // a slow subscriber misses events rather than stalling the informer
		}
	}
}

// Subscribe returns the events from now on, until cancel.
func (l *JobLog) Subscribe() (<-chan JobEvent, func()) {
	ch := make(chan JobEvent, 4096)
	l.mu.Lock()
	l.subs = append(l.subs, ch)
	l.mu.Unlock()
	return ch, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.subs = slices.DeleteFunc(l.subs, func(s chan JobEvent) bool { return s == ch })
	}
}

// Events returns the events since the last Take, in the order the API server reported
// them.
func (l *JobLog) Events() []JobEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events[l.taken:])
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

// Take returns the Work of each Job created since the last Take, and sets every event so
// far aside: a test that runs operations one after the other checks each one's Jobs.
func (l *JobLog) Take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.pending()
	l.taken = len(l.events)
	return out
}

// Pending is what Take would return, without setting anything aside.
func (l *JobLog) Pending() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pending()
}

func (l *JobLog) pending() []string {
	var out []string
	for _, ev := range l.events[l.taken:] {
		if ev.Type == watch.Added {
			out = append(out, Work(ev.Job)...)
		}
	}
	return out
}

// Await waits, up to ClusterTimeout, until what Take would return matches want, then
// takes it and returns those Jobs, as they were when created. The log follows the Jobs
// through a watch of its own, which can trail what the test read through a Get (an
// operation's final status): the Jobs it already made may not be in the log yet.
func (l *JobLog) Await(g Gomega, want gomegatypes.GomegaMatcher, description ...any) []batchv1.Job {
	g.Eventually(l.Pending).WithTimeout(ClusterTimeout).WithPolling(100*time.Millisecond).Should(want, description...)
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []batchv1.Job
	for _, ev := range l.events[l.taken:] {
		if ev.Type == watch.Added {
			out = append(out, ev.Job)
		}
	}
	l.taken = len(l.events)
	return out
}

// JobRecord is what a test learns of one Job over its life.
type JobRecord struct {
	UID, Namespace, Name string
	Op, Kind, Node       string
	// Images are what the Job works on: one image for a Job per (image, node), every
	// container's image for a node's pull Job.
	Images  []string
	Created time.Time // metadata.creationTimestamp (whole seconds)
	// When the log first heard of the Job, saw it finished, saw it deleted.
	Seen, Settled, Deleted time.Time
}

// RecordOf is what a Job says of itself.
func RecordOf(j *batchv1.Job) JobRecord {
	return JobRecord{UID: string(j.UID), Namespace: j.Namespace, Name: j.Name,
		Op: j.Labels[jobs.LabelOperation], Kind: j.Labels[jobs.LabelKind], Node: j.Annotations[jobs.AnnotationNode],
		Images: jobs.ImagesOf(j), Created: j.CreationTimestamp.Time}
}

// Pulls says whether the Job works on img.
func (r JobRecord) Pulls(img string) bool { return slices.Contains(r.Images, img) }

// Work is "kind image node" for each image the Job works on: one for a Job per (image,
// node), one per container for a node's pull Job, so that the same list compares equal at
// either pull-Job granularity.
func (r JobRecord) Work() []string {
	out := make([]string, len(r.Images))
	for i, img := range r.Images {
		out[i] = r.Kind + " " + img + " " + r.Node
	}
	return out
}

// Work is the Work of a Job's record.
func Work(j batchv1.Job) []string { return RecordOf(&j).Work() }

// Records returns every Job the log has heard of (Take sets none aside), in the order it
// first did.
func (l *JobLog) Records() []JobRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []JobRecord
	at := map[types.UID]int{}
	for _, ev := range l.events {
		i, known := at[ev.Job.UID]
		if !known {
			i = len(out)
			at[ev.Job.UID] = i
			out = append(out, RecordOf(&ev.Job))
			out[i].Seen = ev.At
		}
		r := &out[i]
		if r.Settled.IsZero() && JobOutcome(&ev.Job) != "" {
			r.Settled = ev.At
		}
		if ev.Type == watch.Deleted {
			r.Deleted = ev.At
		}
	}
	return out
}

// JobOutcome is how a Job ended, Complete or Failed, or "" while it runs.
func JobOutcome(j *batchv1.Job) batchv1.JobConditionType {
	for _, c := range j.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
			return c.Type
		}
	}
	return ""
}
