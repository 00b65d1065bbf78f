package hold

import (
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/metrics"
	"github.com/kubefledged/kube-fledged/internal/plan"
)

var (
	created = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	caching = &plan.StartupTaint{Key: "kubefledged.io/caching", Effect: corev1.TaintEffectNoSchedule}
)

// heldNode is a Ready Linux node of pool web that carries the startup
// taint, changed by opts.
func heldNode(opts ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", CreationTimestamp: metav1.NewTime(created),
			Labels: map[string]string{"pool": "web", corev1.LabelOSStable: "linux"}},
		Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: caching.Key, Effect: caching.Effect}}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

func imageCache(name string, sel map[string]string, images ...string) *v1alpha2.ImageCache {
	return &v1alpha2.ImageCache{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name},
		Spec:       v1alpha2.ImageCacheSpec{CacheSpec: []v1alpha2.CacheSpecImages{{Images: images, NodeSelector: sel}}},
		Status:     v1alpha2.ImageCacheStatus{Status: v1alpha2.ImageCacheActionStatusSucceeded, Reason: string(plan.Create)},
	}
}

var web = map[string]string{"pool": "web"}

func done(failed ...string) CacheState { return CacheState{Known: true, Done: true, Failed: failed} }

func TestDecide(t *testing.T) {
	const timeout = 10 * time.Minute
	gpuOnly := imageCache("gpu", web, "cuda:12")
	gpuOnly.Spec.CacheSpec[0].Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
	tolerant := imageCache("tolerant", web, "nginx:1.27")
	tolerant.Spec.CacheSpec[0].Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
	purged := imageCache("purged", web, "nginx:1.27")
	purged.Status.Reason = string(plan.Purge)
	deleting := imageCache("deleting", web, "nginx:1.27")
	deleting.DeletionTimestamp = &metav1.Time{Time: created}
	windows := func(n *corev1.Node) { n.Labels[corev1.LabelOSStable] = "windows" }
	gpuTainted := func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule})
	}
	notReady := func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }

	tests := []struct {
		name     string
		node     *corev1.Node
		at       time.Duration // after the node's creation
		caches   []Cache
		want     Reason
		failed   []string
		notReady []string
		waiting  []string
		after    time.Duration
	}{{
		name: "no cache at all: released at once", node: heldNode(), want: NoCache,
	}, {
		name: "no cache selects the node", node: heldNode(),
		caches: []Cache{{Cache: imageCache("db", map[string]string{"pool": "db"}, "postgres:16")}}, want: NoCache,
	}, {
		name: "a purged cache wants nothing", node: heldNode(), caches: []Cache{{Cache: purged}}, want: NoCache,
	}, {
		name: "a cache being deleted wants nothing", node: heldNode(), caches: []Cache{{Cache: deleting}}, want: NoCache,
	}, {
		name: "a cache whose Jobs can never run on the node (not Linux) does not apply", node: heldNode(windows),
		caches: []Cache{{Cache: imageCache("web", web, "nginx:1.27")}}, want: NoCache,
	}, {
		name: "a list that does not tolerate the node's other taint does not apply", node: heldNode(gpuTainted),
		caches: []Cache{{Cache: gpuOnly}}, want: NoCache,
	}, {
		name: "a list with tolerations applies despite the startup taint", node: heldNode(),
		caches: []Cache{{Cache: tolerant}}, want: Held, waiting: []string{"apps/tolerant"}, after: timeout,
	}, {
		name: "the reconciler has not looked at the cache yet: held", node: heldNode(), at: time.Second,
		caches: []Cache{{Cache: imageCache("web", web, "nginx:1.27")}},
		want:   Held, waiting: []string{"apps/web"}, after: timeout - time.Second,
	}, {
		name: "a NotReady new node still applies: its images are waited for", node: heldNode(notReady),
		caches: []Cache{{Cache: imageCache("web", web, "nginx:1.27"), State: CacheState{Known: true}}},
		want:   Held, waiting: []string{"apps/web"}, after: timeout,
	}, {
		name: "pairs still pending: held", node: heldNode(), at: time.Minute,
		caches: []Cache{{Cache: imageCache("web", web, "nginx:1.27", "redis:7"), State: CacheState{Known: true, Pending: []string{"redis:7"}}}},
		want:   Held, waiting: []string{"apps/web"}, after: 9 * time.Minute,
	}, {
		name: "every pair settled: released", node: heldNode(), at: 12 * time.Second,
		caches: []Cache{{Cache: imageCache("web", web, "nginx:1.27"), State: done()}, {Cache: imageCache("db", map[string]string{"pool": "db"}, "postgres:16")}},
		want:   Cached,
	}, {
		name: "one cache done, another not: held", node: heldNode(),
		caches: []Cache{{Cache: imageCache("web", web, "nginx:1.27"), State: done()}, {Cache: imageCache("all", nil, "busybox:1.36"), State: CacheState{Known: true}}},
		want:   Held, waiting: []string{"apps/all"}, after: timeout,
	}, {
		name: "a failed image does not keep the node: released at once, naming it", node: heldNode(), at: 8 * time.Second,
		caches: []Cache{{Cache: imageCache("web", web, "nginx:1.27", "fail.invalid/x:1"), State: done("fail.invalid/x:1")}},
		want:   Failed, failed: []string{"fail.invalid/x:1"},
	}, {
		name: "a failure while another cache is pending: held", node: heldNode(),
		caches: []Cache{{Cache: imageCache("web", web, "fail.invalid/x:1"), State: done("fail.invalid/x:1")},
			{Cache: imageCache("all", nil, "busybox:1.36"), State: CacheState{Known: true, Pending: []string{"busybox:1.36"}}}},
		want: Held, waiting: []string{"apps/all"}, failed: []string{"fail.invalid/x:1"}, after: timeout,
	}, {
		name: "timeout: released, naming pending and failed images", node: heldNode(), at: timeout,
		caches: []Cache{{Cache: imageCache("web", web, "fail.invalid/x:1"), State: done("fail.invalid/x:1")},
			{Cache: imageCache("all", nil, "busybox:1.36", "nginx:1.27"), State: CacheState{Known: true, Pending: []string{"busybox:1.36"}}}},
		want: Timeout, waiting: []string{"apps/all"}, failed: []string{"fail.invalid/x:1"}, notReady: []string{"busybox:1.36", "fail.invalid/x:1"},
	}, {
		name: "timeout before the reconciler planned the node: every image of the cache is named", node: heldNode(notReady), at: timeout + time.Hour,
		caches: []Cache{{Cache: imageCache("web", web, "nginx:1.27", "redis:7")}},
		want:   Timeout, waiting: []string{"apps/web"}, notReady: []string{"nginx:1.27", "redis:7"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			d := Decide(Input{Node: tt.node, Taint: caching, Timeout: timeout, Now: created.Add(tt.at), Caches: tt.caches})
			g.Expect(d.Reason).To(Equal(tt.want))
			g.Expect(d.Release()).To(Equal(tt.want != Held))
			g.Expect(d.Failed).To(Equal(tt.failed))
			g.Expect(d.NotReady).To(Equal(tt.notReady))
			g.Expect(d.Waiting).To(Equal(tt.waiting))
			g.Expect(d.After).To(Equal(tt.after))
			g.Expect(d.Since).To(Equal(tt.at))
		})
	}
}

func TestEvent(t *testing.T) {
	many := make([]string, 12)
	for i := range many {
		many[i] = fmt.Sprintf("img-%02d:1", i)
	}
	tests := []struct {
		d                   Decision
		typ, reason, prefix string
		contains            []string
	}{
		{d: Decision{Reason: NoCache, Since: 1200 * time.Millisecond}, typ: "Normal", reason: "StartupTaintRemoved",
			prefix: "No ImageCache puts images on the node: removed taint kubefledged.io/caching:NoSchedule (1s after the node was created)"},
		{d: Decision{Reason: Cached, Caches: []string{"apps/web"}, Since: 12 * time.Second}, typ: "Normal", reason: "StartupTaintRemoved",
			prefix: "The images of ImageCache apps/web are on the node: removed taint kubefledged.io/caching:NoSchedule (12s after"},
		{d: Decision{Reason: Failed, Caches: []string{"apps/a", "apps/b"}, Failed: []string{"x:1"}, Since: 9 * time.Second}, typ: "Warning", reason: "StartupTaintRemovedImagesFailed",
			prefix: "1 image(s) of ImageCaches apps/a, apps/b failed to pull onto the node: x:1; the other images are on it.", contains: []string{"a failing image does not keep a node out of service"}},
		{d: Decision{Reason: Timeout, Waiting: []string{"apps/web"}, NotReady: many, Since: 10 * time.Minute}, typ: "Warning", reason: "StartupTaintTimeout",
			prefix:   "12 image(s) of ImageCache apps/web were not cached on the node within 10m0s: img-00:1, ",
			contains: []string{"img-09:1 and 2 more. Removed taint kubefledged.io/caching:NoSchedule anyway"}},
	}
	for _, tt := range tests {
		t.Run(string(tt.d.Reason), func(t *testing.T) {
			g := NewWithT(t)
			typ, reason, msg := tt.d.Event(caching)
			g.Expect(typ).To(Equal(tt.typ))
			g.Expect(reason).To(Equal(tt.reason))
			g.Expect(msg).To(HavePrefix(tt.prefix))
			for _, c := range tt.contains {
				g.Expect(msg).To(ContainSubstring(c))
			}
			g.Expect(strings.Contains(msg, "img-10")).To(BeFalse(), "at most 10 names")
		})
	}
}

// Waiting names what is known to be missing, and guesses nothing: a cache
// the reconciler has not looked at adds no image.
func TestWaiting(t *testing.T) {
	web2 := imageCache("web", web, "nginx:1.27", "redis:7")
	tests := []struct {
		name   string
		caches []Cache
		want   []string
	}{
		{name: "no cache", want: nil},
		{name: "not looked at yet: nothing known", caches: []Cache{{Cache: web2}}, want: nil},
		{name: "waiting for an operation: every image of the cache", caches: []Cache{{Cache: web2, State: CacheState{Known: true}}},
			want: []string{"nginx:1.27", "redis:7"}},
		{name: "planned: the pending ones", caches: []Cache{{Cache: web2, State: CacheState{Known: true, Pending: []string{"redis:7"}}}},
			want: []string{"redis:7"}},
		{name: "done with a failure: the failed one", caches: []Cache{{Cache: web2, State: done("redis:7")}}, want: []string{"redis:7"}},
		{name: "a cache that does not select the node adds nothing",
			caches: []Cache{{Cache: imageCache("db", map[string]string{"pool": "db"}, "postgres:16"), State: CacheState{Known: true}}}, want: nil},
		{name: "several caches: each image once, sorted", caches: []Cache{
			{Cache: web2, State: CacheState{Known: true, Pending: []string{"redis:7"}}},
			{Cache: imageCache("all", nil, "busybox:1.36", "redis:7"), State: CacheState{Known: true}}},
			want: []string{"busybox:1.36", "redis:7"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(Waiting(Input{Node: heldNode(), Taint: caching, Timeout: time.Minute, Now: created, Caches: tt.caches})).To(Equal(tt.want))
		})
	}
}

// The metrics create the hold histogram's series from the start: their
// reasons must be exactly the ones a decision gives.
func TestReasonsAreTheMetricsLabels(t *testing.T) {
	g := NewWithT(t)
	g.Expect(metrics.HoldReasons).To(ConsistOf(string(Cached), string(Failed), string(NoCache), string(Timeout)))
}
