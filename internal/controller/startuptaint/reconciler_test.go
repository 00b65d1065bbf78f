package startuptaint

// The harness is the ImageCache reconciler's, cut to what this controller
// does: the fake API server records every write (with patch bodies) and
// can change the node just before a patch lands, as a concurrent writer
// would; the ledger holds a table of states; time is a fake clock; Events go to a
// FakeRecorder. Tests call Reconcile directly.

import (
	"context"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/controller/fakeapi"
	"github.com/kubefledged/kube-fledged/internal/heldledger"
	"github.com/kubefledged/kube-fledged/internal/hold"
	"github.com/kubefledged/kube-fledged/internal/metrics"
	"github.com/kubefledged/kube-fledged/internal/plan"
)

var (
	epoch   = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	caching = &plan.StartupTaint{Key: "kubefledged.io/caching", Effect: corev1.TaintEffectNoSchedule}
	// lifecycle is a taint someone else manages on the same node.
	lifecycle = corev1.Taint{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule}
	dedicated = corev1.Taint{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule}
)

const timeout = 10 * time.Minute

// states is a table of how each cache stands on each node.
type states map[string]hold.CacheState // "cache/node"

// ledger writes the table into a ledger as the ImageCache reconciler
// leaves it: a record for a node with images pending or failed, a coverage
// for a node that is done or waits for an operation.
func (s states) ledger(t *testing.T) *heldledger.Ledger {
	l := heldledger.New()
	covered := map[string]map[string]bool{}
	for key, st := range s {
		cache, node, _ := strings.Cut(key, "/")
		switch {
		case !st.Known:
		case st.Pending != nil || st.Failed != nil:
			p := &heldledger.Pulls{Pending: map[string]bool{}, Failed: map[string]bool{}}
			for _, img := range st.Pending {
				p.Pending[img] = true
			}
			for _, img := range st.Failed {
				p.Failed[img] = true
			}
			l.Hold(cacheKey(cache), types.UID("uid-"+cache), map[string]*heldledger.Pulls{node: p}, false)
		default:
			if covered[cache] == nil {
				covered[cache] = map[string]bool{}
			}
			covered[cache][node] = st.Done
		}
	}
	for cache, nodes := range covered {
		l.Cover(cacheKey(cache), types.UID("uid-"+cache), nodes)
	}
	for key, st := range s {
		cache, node, _ := strings.Cut(key, "/")
		if got := l.State(cacheKey(cache), types.UID("uid-"+cache), node); !reflect.DeepEqual(got, st) {
			t.Fatalf("the ledger says %+v of %s, the table %+v", got, key, st)
		}
	}
	return l
}

func cacheKey(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: "apps", Name: name}
}

type harness struct {
	t       *testing.T
	ctx     context.Context
	api     client.WithWatch
	r       *Reconciler
	clock   *clocktesting.FakeClock
	rec     *record.FakeRecorder
	patches []string
	// beforePatch, when set, runs before a patch reaches the API server.
	beforePatch func()
}

func newHarness(t *testing.T, st states, objs ...client.Object) *harness {
	h := &harness{t: t, clock: clocktesting.NewFakeClock(epoch), rec: record.NewFakeRecorder(100)}
	h.ctx = log.IntoContext(context.Background(), logr.Discard())
	h.api = fake.NewClientBuilder().WithScheme(fakeapi.Scheme()).WithObjects(objs...).Build()
	c := interceptor.NewClient(h.api, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			body, _ := p.Data(obj)
			h.patches = append(h.patches, string(body))
			if h.beforePatch != nil {
				f := h.beforePatch
				h.beforePatch = nil
				f()
			}
			return fakeapi.AsAPIServer(p, c.Patch(ctx, obj, p, opts...))
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			t.Errorf("unexpected update of %s: the taint is removed by patch only", obj.GetName())
			return nil
		},
	})
	h.r = New(c, h.rec, caching, timeout, st.ledger(t))
	h.r.Clock = h.clock
	return h
}

func (h *harness) step(node string) ctrl.Result {
	h.t.Helper()
	res, err := h.r.Reconcile(h.ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: node}})
	if err != nil {
		h.t.Fatalf("reconcile %s: %v", node, err)
	}
	return res
}

func (h *harness) taints(node string) []corev1.Taint {
	n := &corev1.Node{}
	if err := h.api.Get(h.ctx, types.NamespacedName{Name: node}, n); err != nil {
		h.t.Fatal(err)
	}
	return n.Spec.Taints
}

func (h *harness) events() []string { return fakeapi.Events(h.rec) }

// node is a Ready Linux node of pool web, created at the epoch and carrying
// the startup taint beside taints.
func node(name string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(epoch),
			Labels: map[string]string{"pool": "web", corev1.LabelOSStable: "linux"}},
		Spec:   corev1.NodeSpec{Taints: append([]corev1.Taint{{Key: caching.Key, Effect: caching.Effect}}, taints...)},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
}

func imageCache(name string, sel map[string]string, images ...string) *v1alpha2.ImageCache {
	return &v1alpha2.ImageCache{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, UID: types.UID("uid-" + name)},
		Spec:       v1alpha2.ImageCacheSpec{CacheSpec: []v1alpha2.CacheSpecImages{{Images: images, NodeSelector: sel}}},
	}
}

var web = map[string]string{"pool": "web"}

// holdSamples is how many releases of reason the histogram has observed,
// and their sum.
func holdSamples(reason hold.Reason) (uint64, float64) {
	m := &dto.Metric{}
	if err := metrics.NodeHoldSeconds.WithLabelValues(string(reason)).(interface{ Write(*dto.Metric) error }).Write(m); err != nil {
		panic(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

func timeoutImages() float64 {
	m := &dto.Metric{}
	if err := metrics.NodeTimeoutImages.Write(m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

func TestRelease(t *testing.T) {
	done := hold.CacheState{Known: true, Done: true}
	tests := []struct {
		name        string
		node        *corev1.Node
		caches      []*v1alpha2.ImageCache
		states      states
		at          time.Duration
		wantTaints  []corev1.Taint // left on the node
		wantEvent   string
		wantRequeue time.Duration
		wantReason  hold.Reason
		notReady    int
	}{{
		name: "no cache applies: released at once, other taints kept", node: node("n1", lifecycle, dedicated),
		caches:     []*v1alpha2.ImageCache{imageCache("db", map[string]string{"pool": "db"}, "postgres:16")},
		wantTaints: []corev1.Taint{lifecycle, dedicated}, wantReason: hold.NoCache,
		wantEvent: "Normal StartupTaintRemoved No ImageCache puts images on the node: removed taint kubefledged.io/caching:NoSchedule (0s after the node was created)",
	}, {
		name: "pairs pending: held until the resync", node: node("n1"), at: time.Minute,
		caches:      []*v1alpha2.ImageCache{imageCache("web", web, "nginx:1.27")},
		states:      states{"web/n1": {Known: true, Pending: []string{"nginx:1.27"}}},
		wantTaints:  []corev1.Taint{{Key: caching.Key, Effect: caching.Effect}},
		wantRequeue: DefaultResync,
	}, {
		name: "pairs pending close to the timeout: looked at again at the timeout", node: node("n1"), at: timeout - 5*time.Second,
		caches:      []*v1alpha2.ImageCache{imageCache("web", web, "nginx:1.27")},
		wantTaints:  []corev1.Taint{{Key: caching.Key, Effect: caching.Effect}},
		wantRequeue: 5 * time.Second,
	}, {
		name: "every pair settled: released with a Normal Event", node: node("n1", dedicated), at: 12 * time.Second,
		caches:     []*v1alpha2.ImageCache{imageCache("web", web, "nginx:1.27"), imageCache("all", nil, "busybox:1.36")},
		states:     states{"web/n1": done, "all/n1": done},
		wantTaints: []corev1.Taint{dedicated}, wantReason: hold.Cached,
		wantEvent: "Normal StartupTaintRemoved The images of ImageCaches apps/all, apps/web are on the node: removed taint kubefledged.io/caching:NoSchedule (12s after the node was created)",
	}, {
		name: "a failed image: released at once with a Warning naming it", node: node("n1"), at: 8 * time.Second,
		caches:     []*v1alpha2.ImageCache{imageCache("web", web, "nginx:1.27", "fail.invalid/x:1")},
		states:     states{"web/n1": {Known: true, Done: true, Failed: []string{"fail.invalid/x:1"}}},
		wantReason: hold.Failed,
		wantEvent:  "Warning StartupTaintRemovedImagesFailed 1 image(s) of ImageCache apps/web failed to pull onto the node: fail.invalid/x:1; the other images are on it.",
	}, {
		name: "the timeout: released with a Warning naming the images not cached", node: node("n1"), at: timeout + time.Second,
		caches:     []*v1alpha2.ImageCache{imageCache("web", web, "nginx:1.27", "redis:7.2")},
		states:     states{"web/n1": {Known: true, Pending: []string{"nginx:1.27", "redis:7.2"}}},
		wantReason: hold.Timeout, notReady: 2,
		wantEvent: "Warning StartupTaintTimeout 2 image(s) of ImageCache apps/web were not cached on the node within 10m1s: nginx:1.27, redis:7.2. Removed taint kubefledged.io/caching:NoSchedule anyway",
	}, {
		name: "a node without the taint: nothing to do", node: func() *corev1.Node { n := node("n1"); n.Spec.Taints = []corev1.Taint{dedicated}; return n }(),
		wantTaints: []corev1.Taint{dedicated},
	}, {
		name:       "only the taint's effect goes: the key with another effect is not ours",
		node:       node("n1", corev1.Taint{Key: caching.Key, Effect: corev1.TaintEffectNoExecute}),
		wantTaints: []corev1.Taint{{Key: caching.Key, Effect: corev1.TaintEffectNoExecute}}, wantReason: hold.NoCache,
		wantEvent: "Normal StartupTaintRemoved No ImageCache",
	}}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			objs := []client.Object{tt.node}
			for _, c := range tt.caches {
				objs = append(objs, c)
			}
			h := newHarness(t, tt.states, objs...)
			h.clock.SetTime(epoch.Add(tt.at))
			count, sum := holdSamples(tt.wantReason)
			images := timeoutImages()

			res := h.step("n1")

			g.Expect(h.taints("n1")).To(Equal(tt.wantTaints))
			g.Expect(res.RequeueAfter).To(Equal(tt.wantRequeue))
			if tt.wantEvent == "" {
				g.Expect(h.events()).To(BeEmpty())
				g.Expect(h.patches).To(BeEmpty())
				return
			}
			g.Expect(h.events()).To(ConsistOf(HavePrefix(tt.wantEvent)))
			g.Expect(h.patches).To(HaveLen(1))
			g.Expect(h.patches[0]).To(HavePrefix(`[{"op":"test","path":"/spec/taints","value":`), "the patch tests the list it read")
			c, s := holdSamples(tt.wantReason)
			g.Expect(c).To(Equal(count+1), "one release observed")
			g.Expect(s-sum).To(BeNumerically("~", tt.at.Seconds(), 0.001), "from the node's creation")
			g.Expect(timeoutImages() - images).To(Equal(float64(tt.notReady)))

			// Released once: a second look writes nothing.
			h.step("n1")
			g.Expect(h.patches).To(HaveLen(1))
			g.Expect(h.events()).To(BeEmpty())
		})
	}
}

// Someone changes the node's taints between our read and our patch: the
// patch's test fails, it is retried on a fresh read, and their change
// stays.
func TestReleaseRace(t *testing.T) {
	tests := []struct {
		name   string
		change func(n *corev1.Node)
		want   []corev1.Taint
	}{
		{"a taint added", func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, dedicated) }, []corev1.Taint{lifecycle, dedicated}},
		{"a taint removed", func(n *corev1.Node) { n.Spec.Taints = n.Spec.Taints[:1] }, nil},
		{"ours removed by someone else", func(n *corev1.Node) { n.Spec.Taints = n.Spec.Taints[1:] }, []corev1.Taint{lifecycle}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			h := newHarness(t, nil, node("n1", lifecycle))
			h.beforePatch = func() {
				n := &corev1.Node{}
				g.Expect(h.api.Get(h.ctx, types.NamespacedName{Name: "n1"}, n)).To(Succeed())
				tt.change(n)
				g.Expect(h.api.Update(h.ctx, n)).To(Succeed())
			}
			h.step("n1")
			g.Expect(h.taints("n1")).To(Equal(tt.want))
			ev := h.events()
			if strings.HasPrefix(tt.name, "ours") {
				g.Expect(h.patches).To(HaveLen(1), "nothing left to remove after the failed test")
				g.Expect(ev).To(BeEmpty(), "their release, not ours")
				return
			}
			g.Expect(h.patches).To(HaveLen(2), "the failed test, then the retry")
			g.Expect(ev).To(HaveLen(1))
		})
	}
}

// The node predicate lets through the held nodes' events that matter, and
// a cache event wakes every held node.
func TestWatches(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, nil, node("held-1"), node("held-2"), func() *corev1.Node {
		n := node("free")
		n.Spec.Taints = nil
		return n
	}())
	p := h.r.heldChanges()
	held, free := node("a"), node("b")
	free.Spec.Taints = nil
	g.Expect(p.Create(event.CreateEvent{Object: held})).To(BeTrue())
	g.Expect(p.Create(event.CreateEvent{Object: free})).To(BeFalse())
	relabelled := held.DeepCopy()
	relabelled.Labels["pool"] = "db"
	g.Expect(p.Update(event.UpdateEvent{ObjectOld: held, ObjectNew: relabelled})).To(BeTrue())
	heartbeat := held.DeepCopy()
	heartbeat.Status.Images = []corev1.ContainerImage{{Names: []string{"x"}}}
	g.Expect(p.Update(event.UpdateEvent{ObjectOld: held, ObjectNew: heartbeat})).To(BeFalse())
	g.Expect(p.Update(event.UpdateEvent{ObjectOld: held, ObjectNew: free})).To(BeFalse(), "released: nothing to do")
	g.Expect(p.Delete(event.DeleteEvent{Object: held})).To(BeFalse())

	var names []string
	for _, r := range h.r.heldNodes(h.ctx, imageCache("web", web, "nginx:1.27")) {
		names = append(names, r.Name)
	}
	sort.Strings(names)
	g.Expect(names).To(Equal([]string{"held-1", "held-2"}))
}

// Held serves the metrics: every node that carries the taint, from its
// creation, with the images the reconciler knows it waits for; nodes
// without the taint are left out.
func TestHeld(t *testing.T) {
	g := NewWithT(t)
	free := node("free")
	free.Spec.Taints = []corev1.Taint{dedicated}
	later := node("n2")
	later.CreationTimestamp = metav1.NewTime(epoch.Add(time.Minute))
	h := newHarness(t, states{
		"web/n1": {Known: true, Pending: []string{"redis:7.2"}, Failed: []string{"fail.invalid/x:1"}},
		"all/n1": {Known: true, Done: true},
		// n2: the reconciler has not looked at web yet, and all waits
		// for an operation.
		"all/n2": {Known: true},
	}, node("n1"), later, free,
		imageCache("web", web, "nginx:1.27", "redis:7.2", "fail.invalid/x:1"), imageCache("all", nil, "busybox:1.36"))

	held, err := h.r.Held(h.ctx)
	g.Expect(err).NotTo(HaveOccurred())
	sort.Slice(held, func(i, j int) bool { return held[i].Name < held[j].Name })
	for i := range held {
		held[i].Created = held[i].Created.UTC() // the API's times come back in the local zone
	}
	g.Expect(held).To(Equal([]metrics.HeldNode{
		{Name: "n1", Created: epoch, Waiting: []string{"fail.invalid/x:1", "redis:7.2"}},
		{Name: "n2", Created: epoch.Add(time.Minute), Waiting: []string{"busybox:1.36"}},
	}))
}
