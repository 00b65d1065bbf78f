package imagecache

// The harness runs the Reconciler against controller-runtime's fake client,
// as cert-manager's controller tests do: every write the reconciler sends is
// recorded (verb, resource, name, patch body, answer) so that tests assert
// the API traffic of a step, and faults can be injected per verb and
// resource to play a quota, a throttling API server or etcd's size limit.
// Time is a fake clock (the kubebuilder CronJob tutorial's injectable
// clock), Events go to a FakeRecorder, and the Job informer is a stand-in
// that reads the fake API server. Tests call Reconcile directly: there is no
// manager, no watch and no goroutine, so a whole operation runs in
// milliseconds and every step is deterministic.

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/controller/fakeapi"
	"github.com/kubefledged/kube-fledged/internal/heldledger"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/podimages"
)

const testNS = "apps"

// epoch is where the fake clock starts: a whole second, so that times
// written to the status (second precision) compare equal to the clock's.
var epoch = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// action is one write the reconciler sent. Reads are not recorded: what a
// controller reads is its own business, what it writes is its behaviour.
type action struct {
	Verb     string // create, update, patch, delete, deletecollection
	Resource string // jobs, imagecaches, imagecaches/status
	Name     string
	Body     string // the patch, for patches
	Err      error  // the answer
}

func (a action) String() string {
	s := a.Verb + " " + a.Resource + "/" + a.Name
	if a.Err != nil {
		s += " -> " + string(apierrors.ReasonForError(a.Err))
	}
	return s
}

// fault makes writes fail: those of verb on resource for which err returns
// an error, the first n of them (n 0: all).
type fault struct {
	verb, resource string
	n              int
	err            func(obj client.Object) error
	hits           int
}

type harness struct {
	t     *testing.T
	ctx   context.Context
	api   client.WithWatch // the fake API server: setup and checks, unrecorded and never failed
	r     *Reconciler
	clock *clocktesting.FakeClock
	rec   *record.FakeRecorder
	pods  *podIndex

	mu      sync.Mutex // the reconciler writes from several goroutines (inParallel)
	actions []action
	faults  []*fault
	// stale are caches the reconciler's next read returns as they were, as
	// an informer that has not yet seen the later writes would.
	stale map[client.ObjectKey]*v1alpha2.ImageCache
}

// newHarness returns a reconciler, initialised as SetupWithManager would,
// over a fake API server holding objs. A zero Deadline is one minute. A zero
// Granularity is node Jobs, the controller's default; the tests written
// against a Job per (image, node) say jobs.PerImage.
func newHarness(t *testing.T, cfg Config, objs ...client.Object) *harness {
	t.Helper()
	h := &harness{t: t, clock: clocktesting.NewFakeClock(epoch), rec: record.NewFakeRecorder(1000)}
	h.ctx = log.IntoContext(context.Background(), logr.Discard())
	h.api = fake.NewClientBuilder().WithScheme(fakeapi.Scheme()).WithRESTMapper(fakeapi.RESTMapper()).
		WithStatusSubresource(&v1alpha2.ImageCache{}).
		WithObjects(objs...).Build()
	c := interceptor.NewClient(h.api, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if ic, ok := obj.(*v1alpha2.ImageCache); ok && h.takeStale(key, ic) {
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return h.write("create", h.resource(obj), obj, "", func() error { return c.Create(ctx, obj, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return h.write("update", h.resource(obj), obj, "", func() error { return c.Update(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			body, _ := p.Data(obj)
			return h.write("patch", h.resource(obj), obj, string(body), func() error { return fakeapi.AsAPIServer(p, c.Patch(ctx, obj, p, opts...)) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return h.write("delete", h.resource(obj), obj, "", func() error { return c.Delete(ctx, obj, opts...) })
		},
		DeleteAllOf: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteAllOfOption) error {
			return h.write("deletecollection", h.resource(obj), obj, "", func() error { return c.DeleteAllOf(ctx, obj, opts...) })
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			return h.write("update", h.resource(obj)+"/"+sub, obj, "", func() error { return c.SubResource(sub).Update(ctx, obj, opts...) })
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			body, _ := p.Data(obj)
			return h.write("patch", h.resource(obj)+"/"+sub, obj, string(body), func() error { return fakeapi.AsAPIServer(p, c.SubResource(sub).Patch(ctx, obj, p, opts...)) })
		},
	})
	if cfg.Deadline == 0 {
		cfg.Deadline = time.Minute
	}
	if cfg.Jobs.HelperImage == "" {
		cfg.Jobs.HelperImage = "ghcr.io/kubefledged/kubefledged:test"
	}
	h.pods = &podIndex{api: h.api}
	h.r = &Reconciler{Client: c, APIReader: c, Jobs: jobIndex{h.api}, Pods: h.pods, Recorder: h.rec, Clock: h.clock, Config: cfg}
	if cfg.StartupTaint != nil {
		h.r.Held = heldledger.New()
	}
	h.r.init()
	return h
}

// write records a write and sends it, unless a fault answers it first.
func (h *harness) write(verb, resource string, obj client.Object, body string, send func() error) error {
	h.mu.Lock()
	var err error
	for _, f := range h.faults {
		if f.verb != verb || f.resource != resource || (f.n > 0 && f.hits >= f.n) {
			continue
		}
		if err = f.err(obj); err != nil {
			f.hits++
			break
		}
	}
	h.mu.Unlock()
	if err == nil {
		err = send()
	}
	h.mu.Lock()
	h.actions = append(h.actions, action{Verb: verb, Resource: resource, Name: obj.GetName(), Body: body, Err: err})
	h.mu.Unlock()
	return err
}

// inject adds a fault; it applies from the next write on. Faults are tried
// in the order they were added, so a fault limited to n writes can come
// before the one that answers after it.
func (h *harness) inject(f fault) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.faults = append(h.faults, &f)
}

// readStale makes the reconciler's next read of the cache return it as it is
// now, whatever is written in between.
func (h *harness) readStale(c *v1alpha2.ImageCache) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stale == nil {
		h.stale = map[client.ObjectKey]*v1alpha2.ImageCache{}
	}
	h.stale[client.ObjectKeyFromObject(c)] = c.DeepCopy()
}

// takeStale fills into with the stale read of key, once, and says whether
// there was one.
func (h *harness) takeStale(key client.ObjectKey, into *v1alpha2.ImageCache) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.stale[key]
	if ok {
		delete(h.stale, key)
		c.DeepCopyInto(into)
	}
	return ok
}

func (h *harness) resource(obj client.Object) string {
	gvk, err := h.api.GroupVersionKindFor(obj)
	if err != nil {
		h.t.Fatalf("no kind for %T: %v", obj, err)
	}
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	return plural.Resource
}

// jobIndex stands in for jobwatch: it reads Jobs straight from the fake API
// server, which is what the informer holds once a Job's event has arrived.
// Its Source is never used: tests call Reconcile, not SetupWithManager.
type jobIndex struct{ api client.Client }

func (j jobIndex) Get(ns, name string) *batchv1.Job {
	job := &batchv1.Job{}
	if err := j.api.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, job); err != nil {
		return nil
	}
	return job
}

func (jobIndex) Source(handler.EventHandler) source.SyncingSource { return nil }

// podIndex stands in for podwatch: it reads pods and namespaces straight
// from the fake API server, or fails with err.
type podIndex struct {
	api client.Client
	err error
	// workloadErr is what Workloads answers, when set.
	workloadErr error
}

func (p *podIndex) Snapshot() ([]*corev1.Pod, map[string]labels.Set, error) {
	if p.err != nil {
		return nil, nil, p.err
	}
	pods := &corev1.PodList{}
	nss := &corev1.NamespaceList{}
	if err := p.api.List(context.Background(), pods); err != nil {
		return nil, nil, err
	}
	if err := p.api.List(context.Background(), nss); err != nil {
		return nil, nil, err
	}
	out := make([]*corev1.Pod, len(pods.Items))
	for i := range pods.Items {
		out[i] = &pods.Items[i]
	}
	labelsOf := map[string]labels.Set{}
	for _, n := range nss.Items {
		labelsOf[n.Name] = n.Labels
	}
	return out, labelsOf, nil
}

// Workloads reads the Deployments, StatefulSets, DaemonSets and CronJobs
// and the namespaces straight from the fake API server, as podwatch's
// informers would hold them.
func (p *podIndex) Workloads() ([]podimages.Workload, map[string]labels.Set, error) {
	if p.workloadErr != nil {
		return nil, nil, p.workloadErr
	}
	var objs []any
	deployments, statefulSets, daemonSets, cronJobs := &appsv1.DeploymentList{}, &appsv1.StatefulSetList{}, &appsv1.DaemonSetList{}, &batchv1.CronJobList{}
	for _, l := range []client.ObjectList{deployments, statefulSets, daemonSets, cronJobs} {
		if err := p.api.List(context.Background(), l); err != nil {
			return nil, nil, err
		}
	}
	for i := range deployments.Items {
		objs = append(objs, &deployments.Items[i])
	}
	for i := range statefulSets.Items {
		objs = append(objs, &statefulSets.Items[i])
	}
	for i := range daemonSets.Items {
		objs = append(objs, &daemonSets.Items[i])
	}
	for i := range cronJobs.Items {
		objs = append(objs, &cronJobs.Items[i])
	}
	var out []podimages.Workload
	for _, o := range objs {
		if w, ok := podimages.WorkloadOf(o); ok {
			out = append(out, w)
		}
	}
	nss := &corev1.NamespaceList{}
	if err := p.api.List(context.Background(), nss); err != nil {
		return nil, nil, err
	}
	labelsOf := map[string]labels.Set{}
	for _, n := range nss.Items {
		labelsOf[n.Name] = n.Labels
	}
	return out, labelsOf, nil
}

func (*podIndex) Sources(handler.EventHandler, ...predicate.Predicate) []source.Source { return nil }

// --- objects ---

// node returns a Ready Linux node with containerd, created an hour before
// the epoch, changed by opts.
func node(name string, opts ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(epoch.Add(-time.Hour)),
			Labels: map[string]string{corev1.LabelOSStable: "linux", corev1.LabelHostname: name}},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			NodeInfo:   corev1.NodeSystemInfo{OperatingSystem: "linux", ContainerRuntimeVersion: "containerd://1.7.2"},
		},
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

func labelled(key, value string) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Labels[key] = value }
}

// cordoned is what kubectl cordon leaves: unschedulable, with its taint.
func cordoned(n *corev1.Node) {
	n.Spec.Unschedulable = true
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule})
}

func notReady(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }

func ready(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionTrue }

func windows(n *corev1.Node) {
	n.Labels[corev1.LabelOSStable] = "windows"
	n.Status.NodeInfo.OperatingSystem = "windows"
}

// holding makes the node report an image in status.images, as the kubelet
// does once it has it.
func holding(names ...string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{Names: names})
	}
}

// report makes every node report exactly these images, as kubelets do
// once they hold them, and delivers the nodes' events.
func (h *harness) report(images ...string) {
	h.t.Helper()
	list := &corev1.NodeList{}
	if err := h.api.List(h.ctx, list); err != nil {
		h.t.Fatalf("listing nodes: %v", err)
	}
	for _, n := range list.Items {
		h.editNode(n.Name, func(n *corev1.Node) {
			n.Status.Images = nil
			for _, img := range images {
				holding(img)(n)
			}
		})
	}
}

// joinedNow makes the node created at the fake clock's present.
func (h *harness) joinedNow(n *corev1.Node) { n.CreationTimestamp = metav1.NewTime(h.clock.Now()) }

// imageCache returns a new cache of one list, on every node.
func imageCache(name string, images ...string) *v1alpha2.ImageCache {
	return &v1alpha2.ImageCache{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, UID: types.UID("uid-" + name), Generation: 1},
		Spec:       v1alpha2.ImageCacheSpec{CacheSpec: []v1alpha2.CacheSpecImages{{Images: images}}},
	}
}

// --- driving ---

func (h *harness) req(name string) ctrl.Request {
	return ctrl.Request{NamespacedName: types.NamespacedName{Namespace: testNS, Name: name}}
}

// step is one reconcile of a cache.
func (h *harness) step(name string) (ctrl.Result, error) {
	return h.r.Reconcile(h.ctx, h.req(name))
}

// settleDown reconciles a cache until a reconcile succeeds without a write
// or an Event, as the work queue would after each status write, without
// moving the clock. It fails the test if that never happens.
func (h *harness) settleDown(name string) ctrl.Result {
	h.t.Helper()
	for i := 0; i < 20; i++ {
		writes, events := len(h.writes()), len(h.rec.Events)
		res, err := h.step(name)
		if err == nil && len(h.writes()) == writes && len(h.rec.Events) == events {
			return res
		}
	}
	h.t.Fatalf("%s never settled down; last writes: %v", name, tail(h.writes(), 10))
	return ctrl.Result{}
}

// runToEnd reconciles a cache, moving the clock to each requeue it asks
// for, until no operation runs; it fails the test if that takes more than
// limit steps (a hang). then, if set, runs after each step (to finish the
// Jobs that exist, say); when it says it changed something, the next step
// comes at once, as the event of that change would wake the cache.
func (h *harness) runToEnd(name string, limit int, then func() bool) {
	h.t.Helper()
	for i := 0; i < limit; i++ {
		res, err := h.step(name)
		if !h.running(name) && h.status(name).Status != v1alpha2.ImageCacheActionStatusProcessing {
			return
		}
		if then != nil && then() {
			continue
		}
		wait := res.RequeueAfter
		if err != nil || wait <= 0 {
			wait = time.Second
		}
		h.advance(wait)
	}
	h.t.Fatalf("%s still running after %d steps (%s); last writes: %v", name, limit, h.clock.Now().Sub(epoch), tail(h.writes(), 10))
}

// running says whether the reconciler holds an operation of the cache.
func (h *harness) running(name string) bool { return h.r.ops.get(h.req(name).NamespacedName) != nil }

func (h *harness) advance(d time.Duration) { h.clock.Step(d) }

// succeed runs the cache's due operation to its end, every Job of it
// completing, and lets the cache settle down after.
func (h *harness) succeed(name string) {
	h.t.Helper()
	h.settleDown(name)
	h.completeAll(name)
	h.settleDown(name)
	if h.running(name) {
		h.t.Fatalf("%s: the operation did not end", name)
	}
}

// --- the world changing ---

// edit changes a cache as a user would; a spec change moves its
// generation, as the API server does (the fake client does not).
func (h *harness) edit(name string, change func(*v1alpha2.ImageCache)) {
	h.t.Helper()
	c := h.cache(name)
	before := c.Spec.DeepCopy()
	change(c)
	if !equality.Semantic.DeepEqual(before, &c.Spec) {
		c.Generation++
	}
	if err := h.api.Update(h.ctx, c); err != nil {
		h.t.Fatalf("editing %s: %v", name, err)
	}
}

// annotate sets an annotation on a cache.
func (h *harness) annotate(name, key, value string) {
	h.edit(name, func(c *v1alpha2.ImageCache) {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[key] = value
	})
}

// requested is the setup of a table row whose operation is asked for on
// demand: cache c's first operation succeeds, then its annotation key is set
// to value.
func requested(key, value string) func(*harness) {
	return func(h *harness) {
		h.succeed("c")
		h.annotate("c", key, value)
	}
}

// addNode creates a node and delivers its event to the reconciler.
func (h *harness) addNode(n *corev1.Node) {
	h.t.Helper()
	if err := h.api.Create(h.ctx, n); err != nil {
		h.t.Fatalf("adding node %s: %v", n.Name, err)
	}
	h.r.cachesForNode(h.ctx, n)
}

// editNode changes a node, status included, and delivers its event.
func (h *harness) editNode(name string, change func(*corev1.Node)) {
	h.t.Helper()
	n := &corev1.Node{}
	if err := h.api.Get(h.ctx, types.NamespacedName{Name: name}, n); err != nil {
		h.t.Fatalf("reading node %s: %v", name, err)
	}
	change(n)
	st := n.Status
	if err := h.api.Update(h.ctx, n); err != nil {
		h.t.Fatalf("updating node %s: %v", name, err)
	}
	n.Status = st
	if err := h.api.Status().Update(h.ctx, n); err != nil {
		h.t.Fatalf("updating the status of node %s: %v", name, err)
	}
	h.r.cachesForNode(h.ctx, n)
}

// job returns the Job of the cache's running operation for (image, node):
// the one not yet labelled with a result.
func (h *harness) job(cache, image, node string) *batchv1.Job {
	h.t.Helper()
	var found []batchv1.Job
	for _, j := range h.jobs(cache) {
		if j.Annotations[jobs.AnnotationImage] == image && j.Annotations[jobs.AnnotationNode] == node && j.Labels[jobs.LabelResult] == "" {
			found = append(found, j)
		}
	}
	if len(found) != 1 {
		h.t.Fatalf("want one running Job of %s for (%s, %s), found %d", cache, image, node, len(found))
	}
	return &found[0]
}

// jobs lists the Jobs of a cache in the fake API server: in its namespace,
// and its delete Jobs in the controller's (Jobs.DeleteNamespace).
func (h *harness) jobs(cache string) []batchv1.Job {
	h.t.Helper()
	list := &batchv1.JobList{}
	if err := h.api.List(h.ctx, list, client.MatchingLabels{jobs.LabelImageCache: cache}); err != nil {
		h.t.Fatalf("listing jobs: %v", err)
	}
	var out []batchv1.Job
	for _, j := range list.Items {
		if j.Namespace == testNS || j.Labels[jobs.LabelCacheNamespace] == testNS {
			out = append(out, j)
		}
	}
	return out
}

// complete ends the (image, node) Job of a cache as the Job controller
// does on success, and delivers its event.
func (h *harness) complete(cache, image, node string) {
	h.finishJob(h.job(cache, image, node), batchv1.JobComplete, "", "")
}

// fail ends the (image, node) Job of a cache as the Job controller does
// once its pod failed, and delivers its event.
func (h *harness) fail(cache, image, node string) {
	h.finishJob(h.job(cache, image, node), batchv1.JobFailed, "BackoffLimitExceeded", "Job has reached the specified backoff limit")
}

func (h *harness) finishJob(job *batchv1.Job, cond batchv1.JobConditionType, reason, message string) {
	h.t.Helper()
	now := metav1.NewTime(h.clock.Now())
	job.Status.Conditions = append(job.Status.Conditions, batchv1.JobCondition{
		Type: cond, Status: corev1.ConditionTrue, Reason: reason, Message: message, LastTransitionTime: now})
	if err := h.api.Status().Update(h.ctx, job); err != nil {
		h.t.Fatalf("finishing job %s: %v", job.Name, err)
	}
	h.r.cacheForJob(h.ctx, job)
}

// startJobs sets status.startTime on the cache's Jobs that have none, as
// the Job controller does at its first sync of a Job, delivers their events
// (at the clock's now: the pacing window times the start from the create),
// and says how many it started.
func (h *harness) startJobs(cache string) int {
	h.t.Helper()
	n := 0
	for _, j := range h.jobs(cache) {
		if j.Status.StartTime != nil {
			continue
		}
		start := metav1.NewTime(h.clock.Now())
		j.Status.StartTime = &start
		if err := h.api.Status().Update(h.ctx, &j); err != nil {
			h.t.Fatalf("starting job %s: %v", j.Name, err)
		}
		h.r.cacheForJob(h.ctx, &j)
		n++
	}
	return n
}

// completeAll completes every Job of the cache that has not finished, and
// says whether there was any.
func (h *harness) completeAll(cache string) bool {
	h.t.Helper()
	found := false
	for _, j := range h.jobs(cache) {
		if j.Labels[jobs.LabelResult] == "" && len(j.Status.Conditions) == 0 {
			h.finishJob(&j, batchv1.JobComplete, "", "")
			found = true
		}
	}
	return found
}

// --- reading ---

func (h *harness) cache(name string) *v1alpha2.ImageCache {
	h.t.Helper()
	c := &v1alpha2.ImageCache{}
	if err := h.api.Get(h.ctx, h.req(name).NamespacedName, c); err != nil {
		h.t.Fatalf("reading cache %s: %v", name, err)
	}
	return c
}

func (h *harness) status(name string) v1alpha2.ImageCacheStatus { return h.cache(name).Status }

// writes returns every write recorded so far.
func (h *harness) writes() []action {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]action{}, h.actions...)
}

// writesOf returns the recorded writes of verb on resource.
func (h *harness) writesOf(verb, resource string) []action {
	var out []action
	for _, a := range h.writes() {
		if a.Verb == verb && a.Resource == resource {
			out = append(out, a)
		}
	}
	return out
}

// events drains the Events recorded since the last call, each as
// "Type Reason Message".
func (h *harness) events() []string { return fakeapi.Events(h.rec) }

// woken drains the caches the pacing limiter woke up.
func (h *harness) woken() []string {
	var out []string
	for {
		select {
		case e := <-h.r.wake:
			out = append(out, e.Object.GetName())
		default:
			return out
		}
	}
}

// condition returns a condition of the cache's status.
func condition(st v1alpha2.ImageCacheStatus, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(st.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// outcome is the part of a status that users see: the original's fields.
type outcome struct {
	Status  v1alpha2.ImageCacheActionStatus
	Reason  string
	Message string
}

func outcomeOf(st v1alpha2.ImageCacheStatus) outcome {
	return outcome{Status: st.Status, Reason: st.Reason, Message: st.Message}
}

func tail(a []action, n int) []action { return a[max(len(a)-n, 0):] }
