package imagecache

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/controller/cachestatus"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/metrics"
	"github.com/kubefledged/kube-fledged/internal/plan"
	"github.com/kubefledged/kube-fledged/internal/results"
)

// pinPhase is the pinning that follows an operation's pulls, when its cache
// pins: one pin Job per node (or per MaxPinImages of its images), paced as
// delete Jobs are, the operation ending only once they are settled.
type pinPhase struct {
	// todo are the Jobs not created yet, in node order.
	todo []*pinJob
	// running are the Jobs created and not settled, by name.
	running map[string]*pinJob
	// failed counts the pairs whose pin failed; told is set once the
	// Event that says so is sent, for a finish that is retried.
	failed int
	told   bool
}

type pinJob struct {
	name    string
	kind    jobs.Kind
	node    jobs.Node
	images  []string
	created time.Time
	// slots are the pacing slots it holds while held: from when they were
	// taken until it is settled.
	slots slots
	held  bool
}

// pins says whether the cache pins its images: its spec.pin, or the
// controller's --pin-images when that is unset.
func (r *Reconciler) pins(cache *v1alpha2.ImageCache) bool {
	if cache.Spec.Pin != nil {
		return *cache.Spec.Pin
	}
	return r.Config.PinImages
}

// unpins says whether the cache's delete Jobs release its pins: it pins, or
// its status says it did.
func (r *Reconciler) unpins(cache *v1alpha2.ImageCache) bool {
	return r.pins(cache) || cache.Status.Pins != nil
}

// pinStep runs the pin phase of an operation whose pulls have all settled,
// and says whether it is over, or else when to look again. Pin failures
// never fail the operation: its images are on the nodes, which is what its
// status reports; they are only not protected from the kubelet's image
// garbage collection, which the Pinned condition and status.pins say.
func (r *Reconciler) pinStep(ctx context.Context, cache *v1alpha2.ImageCache, op *operation) (bool, time.Duration) {
	if op.kind == plan.Purge || !r.pins(cache) {
		return true, 0
	}
	if op.pins == nil {
		// The finalizer comes first: a cache deleted from now on
		// releases what it pins.
		if err := r.setFinalizer(ctx, cache, true); err != nil {
			log.FromContext(ctx).Info("adding the unpin finalizer failed; retrying", "error", err.Error())
			return false, time.Second
		}
		r.pinned.pinsAgain(op.uid)
		nodes, err := r.listNodes(ctx)
		if err != nil {
			return false, time.Second
		}
		op.pins = r.planPins(cache, op, nodes.Items)
	}
	r.createPins(ctx, cache, op)
	next := r.settlePins(ctx, cache, op)
	if len(op.pins.todo) == 0 && len(op.pins.running) == 0 {
		r.announcePinFailures(cache, op.pins)
		return true, 0
	}
	if len(op.pins.running) == 0 {
		// Waiting for slots only: the limiter wakes the cache.
		return false, time.Second
	}
	return false, next
}

// planPins decides the operation's pin Jobs (plan.Pins) and records the
// nodes that cannot pin.
func (r *Reconciler) planPins(cache *v1alpha2.ImageCache, op *operation, nodes []corev1.Node) *pinPhase {
	w := plan.Pins(r.pinInput(op, nodes))
	r.pinned.unsupported(op.uid, w.Unsupported)
	phase := &pinPhase{running: map[string]*pinJob{}}
	phase.add(cache.Name, op.id, jobs.Pin, w.Images, w.Nodes)
	byName := map[string]jobs.Node{}
	for i := range nodes {
		byName[nodes[i].Name] = jobs.Node{Name: nodes[i].Name, Runtime: nodes[i].Status.NodeInfo.ContainerRuntimeVersion}
	}
	phase.add(cache.Name, op.id, jobs.Unpin, r.pinned.unwanted(op.uid, wantedImages(&op.spec), deletedPairs(op)), byName)
	return phase
}

// add queues the Jobs of kind for images by node, MaxPinImages a Job.
// Nodes gone from the cluster are left out: their images went with them.
func (p *pinPhase) add(cache, opID string, kind jobs.Kind, images map[string][]string, nodes map[string]jobs.Node) {
	for _, node := range sortedKeys(images) {
		n, ok := nodes[node]
		if !ok {
			continue
		}
		for imgs := images[node]; len(imgs) > 0; {
			chunk := imgs[:min(len(imgs), jobs.MaxPinImages)]
			imgs = imgs[len(chunk):]
			p.todo = append(p.todo, &pinJob{kind: kind, node: n, images: chunk, name: jobs.PinJobName(cache, opID, kind, node, chunk)})
		}
	}
}

// deletedPairs are the pairs the operation's delete Jobs removed: their
// pins went with them (cri-rmi --unpin-owner).
func deletedPairs(op *operation) map[pinPair]bool {
	out := map[pinPair]bool{}
	for i := range op.table.pairs {
		if p := &op.table.pairs[i]; p.work.Kind == jobs.Delete && p.state == succeeded {
			out[pinPair{p.work.Image, p.work.Node.Name}] = true
		}
	}
	return out
}

// pinInput is what the operation's pins are decided from. A pair its Job
// pulled is pinned again whatever the ledger says: the node did not hold
// the image (someone removed it, pin and all), and the new copy carries no
// label. A new-node operation pins its nodes only, unless this process
// knows nothing of the cache's pins yet (it restarted): then every node,
// or its status would count the new nodes' pins alone.
func (r *Reconciler) pinInput(op *operation, nodes []corev1.Node) plan.PinInput {
	failed, pulled := map[pinPair]bool{}, map[pinPair]bool{}
	for _, it := range op.final.items {
		if it.Outcome.State == results.Succeeded {
			pulled[pinPair{it.Image, it.Node}] = true
		} else {
			failed[pinPair{it.Image, it.Node}] = true
		}
	}
	var only map[string]bool
	if op.only != nil && r.pinned.known(op.uid) {
		only = map[string]bool{}
		for n := range op.only {
			only[n] = true
		}
		for n := range op.joined {
			only[n] = true
		}
	}
	return plan.PinInput{Spec: op.spec, Nodes: nodes, Only: only, StartupTaint: r.Config.StartupTaint,
		Failed: func(img, n string) bool { return failed[pinPair{img, n}] },
		Pinned: func(img, n string) bool { return !pulled[pinPair{img, n}] && r.pinned.has(op.uid, img, n) }}
}

// createPins creates the pin Jobs the caps allow, a slot each, as a delete
// Job takes. A create that fails settles its Job's images as failed: the
// next operation tries them again.
func (r *Reconciler) createPins(ctx context.Context, cache *v1alpha2.ImageCache, op *operation) {
	key := client.ObjectKeyFromObject(cache)
	owner := jobs.Owner{Cache: cache, Operation: op.id}
	var left []*pinJob
	for _, pj := range op.pins.todo {
		if _, s := r.limiter.Take(key, pj.node.Name, 1, 1); s == 0 {
			left = append(left, pj)
			continue
		} else {
			pj.slots, pj.held = slots{node: pj.node.Name, n: s}, true
		}
		job, err := jobs.BuildPin(owner, pj.kind, pj.node, pj.images, nil, r.Config.Jobs)
		if err == nil {
			err = r.Client.Create(ctx, job)
		}
		if err != nil && !isAlreadyExists(err) {
			log.FromContext(ctx).Info("creating a pin job failed", "job", pj.name, "error", err.Error())
			r.settlePin(ctx, cache, op, pj, results.PinOutcome{Failed: failedAll(pj.images, "creating the pin Job failed: "+err.Error())})
			continue
		}
		metrics.JobsCreated.WithLabelValues(string(pj.kind)).Inc()
		pj.created = r.Clock.Now()
		op.pins.running[pj.name] = pj
	}
	op.pins.todo = left
	if len(left) == 0 {
		r.limiter.Forget(key)
	}
	r.gaugeSlots()
}

// settlePins settles the pin Jobs that finished or reached their deadline,
// and returns when the next deadline falls.
func (r *Reconciler) settlePins(ctx context.Context, cache *v1alpha2.ImageCache, op *operation) time.Duration {
	now := r.Clock.Now()
	ns := jobs.Namespace(cache, jobs.Pin, r.Config.Jobs)
	var pods map[string][]corev1.Pod
	next := time.Duration(0)
	for name, pj := range op.pins.running {
		deadline := pj.created.Add(r.Config.Deadline)
		out, done := results.PinOutcome{}, false
		if obj := r.Jobs.Get(ns, name); obj != nil {
			if pods == nil {
				pods = r.listPods(ctx, r.jobNamespaces(cache), op.id)
			}
			out, done = results.Pin(obj, pods[name], pj.images)
		}
		if !done && !now.Before(deadline) {
			out, done = results.PinExpired(name, pj.images), true
		}
		if done {
			r.settlePin(ctx, cache, op, pj, out)
			continue
		}
		if d := deadline.Sub(now) + deadlineSlack; next == 0 || d < next {
			next = d
		}
	}
	return next
}

// settlePin takes in what one pin Job did, gives back its slot and, under
// the delete policy, deletes it.
func (r *Reconciler) settlePin(ctx context.Context, cache *v1alpha2.ImageCache, op *operation, pj *pinJob, out results.PinOutcome) {
	if pj.kind == jobs.Pin {
		r.pinned.record(op.uid, pj.node.Name, out)
	}
	op.pins.failed += len(out.Failed)
	delete(op.pins.running, pj.name)
	if pj.held {
		pj.held = false
		r.limiter.Release(client.ObjectKeyFromObject(cache), pj.slots.node, pj.slots.n)
	}
	result := jobs.ResultSucceeded
	if len(out.Failed) > 0 || out.Unsupported != "" {
		result = jobs.ResultFailed
	}
	metrics.JobsFinished.WithLabelValues(string(pj.kind), result).Inc()
	if !pj.created.IsZero() && r.deletesSettled() {
		key := client.ObjectKey{Namespace: jobs.Namespace(cache, jobs.Pin, r.Config.Jobs), Name: pj.name}
		if !r.deleteJobs(ctx, []client.ObjectKey{key}) {
			op.sweep = true
		}
	}
}

// announcePinFailures tells, by a Warning Event, of the pins that failed
// in this operation, once.
func (r *Reconciler) announcePinFailures(cache *v1alpha2.ImageCache, p *pinPhase) {
	if p.failed == 0 || p.told {
		return
	}
	p.told = true
	r.Recorder.Event(cache, corev1.EventTypeWarning, v1alpha2.PinnedReasonPinFailed, fmt.Sprintf(
		"%d (image, node) pairs could not be pinned: they are cached, but the kubelet's image garbage collection may delete them; see status.pins.failures", p.failed))
}

func failedAll(images []string, why string) map[string]string {
	out := make(map[string]string, len(images))
	for _, img := range images {
		out[img] = why
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// pinsAtEnd sets what the cache holds pinned as its operation ends. A purge
// released its pins (its delete Jobs ran cri-rmi --unpin-owner), an update
// those of the images it dropped.
func (r *Reconciler) pinsAtEnd(st *v1alpha2.ImageCacheStatus, op *operation) {
	if op.pins == nil {
		if op.kind == plan.Purge {
			r.pinned.forget(op.uid)
			cachestatus.SetPins(st, nil, 0, op.generation)
		}
		return
	}
	r.pinned.keep(op.uid, wantedImages(&op.spec))
	pins, pinned := r.pinned.status(op.uid)
	cachestatus.SetPins(st, pins, pinned, op.generation)
}
