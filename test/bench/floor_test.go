package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/images"
	"github.com/kubefledged/kube-fledged/internal/jobs"
)

// floorJob is the controller's pull Job for (image, node) without what ties
// it to the controller: no owner (the garbage collector would delete a Job
// whose owner does not exist) and none of its labels (its start-up clean-up
// deletes every Job labelled as its own).
func floorJob(ns, image, node string) (*batchv1.Job, error) {
	w, err := floorWork(image, node)
	if err != nil {
		return nil, err
	}
	job, err := jobs.Build(floorOwner(ns), w, floorOptions)
	return unowned(job), err
}

// floorNodeJob is the controller's node pull Job for a node's images, as floorJob is
// its Job per pair: the floor of scenario 8, where Jobs per pair would take hours.
func floorNodeJob(ns, node string, imgs []string) (*batchv1.Job, error) {
	ws := make([]jobs.Work, len(imgs))
	for i, img := range imgs {
		w, err := floorWork(img, node)
		if err != nil {
			return nil, err
		}
		ws[i] = w
	}
	job, err := jobs.BuildNode(floorOwner(ns), ws, floorOptions)
	return unowned(job), err
}

var floorOptions = jobs.Options{HelperImage: "example.test/kubefledged:bench", PullPolicy: "IfNotPresent", ActiveDeadline: 3600}

func floorOwner(ns string) jobs.Owner {
	return jobs.Owner{Cache: &v1alpha2.ImageCache{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "floor", UID: "bench-floor"}}, Operation: "floor"}
}

func floorWork(image, node string) (jobs.Work, error) {
	ref, err := images.Parse(image)
	if err != nil {
		return jobs.Work{}, err
	}
	return jobs.Work{Kind: jobs.Pull, Image: image, Ref: ref, Node: jobs.Node{Name: node, Runtime: "containerd://1.7.27"}}, nil
}

// unowned strips a built Job of its owner and labels; nil stays nil.
func unowned(job *batchv1.Job) *batchv1.Job {
	if job == nil {
		return nil
	}
	job.OwnerReferences = nil
	job.Labels = map[string]string{"bench.kubefledged.io/floor": "true"}
	job.Spec.Template.Labels = map[string]string{"bench.kubefledged.io/floor": "true"}
	return job
}

// floor measures one bare Job per (image, node).
func (e *env) floor(name, ns string, nodes, imgs []string) (*floorResult, error) {
	var all []*batchv1.Job
	for _, img := range imgs {
		for _, node := range nodes {
			j, err := floorJob(ns, img, node)
			if err != nil {
				return nil, err
			}
			all = append(all, j)
		}
	}
	return e.floorOf(name, ns, all)
}

// nodeFloor measures one bare Job per node, holding all of imgs.
func (e *env) nodeFloor(name, ns string, nodes, imgs []string) (*floorResult, error) {
	all := make([]*batchv1.Job, len(nodes))
	for i, node := range nodes {
		j, err := floorNodeJob(ns, node, imgs)
		if err != nil {
			return nil, err
		}
		all[i] = j
	}
	return e.floorOf(name, ns, all)
}

// floorOf creates the Jobs as fast as the API server takes them and waits for all to
// finish, then deletes them.
func (e *env) floorOf(name, ns string, all []*batchv1.Job) (*floorResult, error) {
	ctx, cancel := e.phaseContext()
	defer cancel()
	if err := e.namespace(ctx, ns); err != nil {
		return nil, err
	}
	jw, err := watchJobs(ctx, e.kube, ns)
	if err != nil {
		return nil, err
	}
	e.t.Logf("%s: floor of %d bare Jobs", name, len(all))
	cpu0 := sampleCPU(e.sb.Dir(), 0)
	began := time.Now()
	var retries atomic.Int64
	if err := e.inParallel(all, func(j *batchv1.Job) error { return createRetrying(ctx, e, ns, j, &retries) }); err != nil {
		return nil, err
	}
	created := time.Since(began)
	last, err := jw.waitFinished(ctx, len(all))
	if err != nil {
		return nil, err
	}
	cpu1 := sampleCPU(e.sb.Dir(), 0)
	r := &floorResult{
		Jobs: len(all), Seconds: round(last.Sub(began).Seconds(), 2), CreateSeconds: round(created.Seconds(), 2),
		CreatesPerSecond: round(float64(len(all))/created.Seconds(), 1), CreateRetries: retries.Load(),
		Observed: jw.figures(), CPU: cpuBetween(cpu0, cpu1),
	}
	e.t.Logf("%s: floor %.1fs (creates %.1fs, %.0f/s)", name, r.Seconds, r.CreateSeconds, r.CreatesPerSecond)
	if err := e.deleteJobs(ctx, ns, all); err != nil {
		return r, err
	}
	gone, err := e.waitGone(ns)
	r.CleanupSeconds = round(gone.Seconds(), 1)
	return r, err
}

// createRetrying creates a Job, retrying what an overloaded API server
// answers (429, timeouts): the floor is what the API server takes, and a
// refusal under load is part of that.
func createRetrying(ctx context.Context, e *env, ns string, j *batchv1.Job, retries *atomic.Int64) error {
	for attempt := 0; ; attempt++ {
		_, err := e.floorC.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		if attempt >= 20 || ctx.Err() != nil {
			return fmt.Errorf("creating floor Job %s: %w", j.Name, err)
		}
		retries.Add(1)
		time.Sleep(time.Duration(attempt+1) * 100 * time.Millisecond)
	}
}

// deleteJobs deletes Jobs one by one, in parallel. A deletecollection of
// thousands of Jobs outlasts the API server's request timeout on a loaded
// machine (it deletes them one at a time) and fails half done.
func (e *env) deleteJobs(ctx context.Context, ns string, all []*batchv1.Job) error {
	bg := metav1.DeletePropagationBackground
	return e.inParallel(all, func(j *batchv1.Job) error {
		var err error
		for attempt := 0; attempt < 10; attempt++ {
			err = e.floorC.BatchV1().Jobs(ns).Delete(ctx, j.Name, metav1.DeleteOptions{PropagationPolicy: &bg})
			if err == nil || apierrors.IsNotFound(err) {
				return nil
			}
			time.Sleep(time.Duration(attempt+1) * 100 * time.Millisecond)
		}
		return err
	})
}

// inParallel calls do on every Job, FloorParallelism at a time, and returns the first
// error: the floor measures the API server at the parallelism the benchmark sets.
func (e *env) inParallel(all []*batchv1.Job, do func(*batchv1.Job) error) error {
	work := make(chan *batchv1.Job)
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range e.cfg.FloorParallelism {
		wg.Go(func() {
			for j := range work {
				if err := do(j); err != nil {
					once.Do(func() { first = err })
				}
			}
		})
	}
	for _, j := range all {
		work <- j
	}
	close(work)
	wg.Wait()
	return first
}
