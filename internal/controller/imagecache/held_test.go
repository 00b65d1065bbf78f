package imagecache

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/heldledger"
	"github.com/kubefledged/kube-fledged/internal/heldledger/heldledgertest"
	"github.com/kubefledged/kube-fledged/internal/hold"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/plan"
)

var caching = &plan.StartupTaint{Key: "kubefledged.io/caching", Effect: corev1.TaintEffectNoSchedule}

// heldByTaint puts the startup taint on a node, as its node pool does.
func heldByTaint(n *corev1.Node) {
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: caching.Key, Effect: caching.Effect})
}

func released(n *corev1.Node) { n.Spec.Taints = nil }

// startupConfig is the reconciler's configuration with the startup taint
// set, as the controller command wires it.
func startupConfig() Config {
	return Config{Granularity: jobs.PerImage, StartupTaint: caching, Jobs: jobsOptionsWith(caching.Toleration())}
}

func jobsOptionsWith(t ...corev1.Toleration) jobs.Options { return jobs.Options{PullTolerations: t} }

// heldHarness is a harness whose reconciler runs with the startup taint,
// writing a ledger.
func heldHarness(t *testing.T, cfg Config, objs ...*corev1.Node) *harness {
	h := newHarness(t, cfg)
	for _, n := range objs {
		if err := h.api.Create(h.ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

func (h *harness) create(c *v1alpha2.ImageCache) {
	h.t.Helper()
	if err := h.api.Create(h.ctx, c); err != nil {
		h.t.Fatalf("creating cache %s: %v", c.Name, err)
	}
}

// nodeState reads from the ledger how cache c stands on node n.
func (h *harness) nodeState(c, n string) hold.CacheState {
	return h.r.Held.State(h.req(c).NamespacedName, types.UID("uid-"+c), n)
}

// Each step of a cache on a held node, as the startup-taint controller
// reads it from the ledger, and the nodes the ledger wakes.
func TestHeldNodeState(t *testing.T) {
	const (
		nginx = "nginx:1.27"
		redis = "redis:7.2"
		slow  = "fail.invalid/slow:1"
	)
	pending := func(imgs ...string) hold.CacheState { return hold.CacheState{Known: true, Pending: imgs} }
	done := func(failed ...string) hold.CacheState {
		return hold.CacheState{Known: true, Done: true, Failed: failed}
	}
	waiting := hold.CacheState{Known: true}
	gpu := []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}

	tests := []struct {
		name     string
		nodes    []*corev1.Node
		cache    *v1alpha2.ImageCache
		steps    func(h *harness, g Gomega)
		want     hold.CacheState
		notified []string
	}{{
		name:  "not looked at yet: unknown",
		nodes: []*corev1.Node{node("a"), node("new", heldByTaint)},
		cache: imageCache("c", nginx, redis),
		steps: func(h *harness, g Gomega) {},
		want:  hold.CacheState{},
	}, {
		name:  "its Jobs are running: pending",
		nodes: []*corev1.Node{node("a"), node("new", heldByTaint)},
		cache: imageCache("c", nginx, redis),
		steps: func(h *harness, g Gomega) { h.settleDown("c") },
		want:  pending(nginx, redis),
	}, {
		name:  "its Jobs succeeded: done, reported once, before the operation ends",
		nodes: []*corev1.Node{node("a"), node("new", heldByTaint)},
		cache: imageCache("c", nginx, redis),
		steps: func(h *harness, g Gomega) {
			h.settleDown("c")
			h.complete("c", nginx, "new")
			h.complete("c", redis, "new")
			h.settleDown("c")
			g.Expect(h.running("c")).To(BeTrue(), "node a's Jobs still run")
		},
		want: done(), notified: []string{"new"},
	}, {
		name:  "a failed pull is settled too: done, naming it",
		nodes: []*corev1.Node{node("new", heldByTaint)},
		cache: imageCache("c", nginx, redis),
		steps: func(h *harness, g Gomega) {
			h.settleDown("c")
			h.complete("c", nginx, "new")
			h.fail("c", redis, "new")
			h.settleDown("c")
		},
		want: done(redis), notified: []string{"new"},
	}, {
		name:  "a pull that never finishes is settled at the pull deadline",
		nodes: []*corev1.Node{node("new", heldByTaint)},
		cache: imageCache("c", nginx, slow),
		steps: func(h *harness, g Gomega) {
			h.settleDown("c")
			h.complete("c", nginx, "new")
			h.runToEnd("c", 10, nil)
		},
		want: done(slow), notified: []string{"new"},
	}, {
		name:  "an invalid image fails without a Job",
		nodes: []*corev1.Node{node("new", heldByTaint)},
		cache: imageCache("c", nginx, "Not A Ref"),
		steps: func(h *harness, g Gomega) { h.succeed("c") },
		want:  done("Not A Ref"), notified: []string{"new"},
	}, {
		name:  "images the node reports need no Job: done at the start",
		nodes: []*corev1.Node{node("a"), node("new", heldByTaint, holding("docker.io/library/nginx:1.27"), holding("docker.io/library/redis:7.2"))},
		cache: imageCache("c", nginx, redis),
		steps: func(h *harness, g Gomega) {
			h.settleDown("c")
			for _, j := range h.jobs("c") {
				g.Expect(j.Annotations).NotTo(HaveKeyWithValue("kubefledged.io/node", "new"))
			}
		},
		want: done(), notified: []string{"new"},
	}, {
		name:  "a list with tolerations pulls onto a held node, its Job tolerating the taint",
		nodes: []*corev1.Node{node("new", heldByTaint)},
		cache: func() *v1alpha2.ImageCache {
			c := imageCache("c", nginx)
			c.Spec.CacheSpec[0].Tolerations = gpu
			return c
		}(),
		steps: func(h *harness, g Gomega) {
			h.settleDown("c")
			g.Expect(h.job("c", nginx, "new").Spec.Template.Spec.Tolerations).To(Equal(append(gpu, caching.Toleration())))
		},
		want: pending(nginx),
	}, {
		name:  "a held node that joins a running operation",
		nodes: []*corev1.Node{node("a")},
		cache: imageCache("c", nginx, slow),
		steps: func(h *harness, g Gomega) {
			h.settleDown("c")
			g.Expect(h.nodeState("c", "new")).To(Equal(waiting), "not a node of the operation yet")
			h.addNode(node("new", heldByTaint, h.joinedNow))
			h.settleDown("c")
			h.complete("c", nginx, "new")
			h.settleDown("c")
		},
		want: pending(slow),
	}, {
		name:  "a held node that joins later gets an operation of its own",
		nodes: []*corev1.Node{node("a")},
		cache: imageCache("c", nginx),
		steps: func(h *harness, g Gomega) {
			h.succeed("c")
			h.advance(time.Minute)
			h.addNode(node("new", heldByTaint, h.joinedNow))
			g.Expect(h.nodeState("c", "new")).To(Equal(waiting), "covered by no operation yet")
			h.succeed("c")
			g.Expect(h.status("c").Reason).To(Equal(v1alpha2.ImageCacheReasonImageCacheNewNodes))
		},
		want: done(), notified: []string{"new"},
	}, {
		name:  "an update adds what the spec gained to the record and pulls its failures again",
		nodes: []*corev1.Node{node("new", heldByTaint)},
		cache: imageCache("c", nginx),
		steps: func(h *harness, g Gomega) {
			h.settleDown("c")
			h.fail("c", nginx, "new")
			h.settleDown("c")
			h.edit("c", func(c *v1alpha2.ImageCache) { c.Spec.CacheSpec[0].Images = append(c.Spec.CacheSpec[0].Images, redis) })
			h.settleDown("c")
			g.Expect(h.status("c").Reason).To(Equal(v1alpha2.ImageCacheReasonImageCacheUpdate))
		},
		want: hold.CacheState{Known: true, Pending: []string{nginx, redis}}, notified: []string{"new"},
	}, {
		name:  "a purge wants nothing on the node",
		nodes: []*corev1.Node{node("a"), node("new", heldByTaint)},
		cache: imageCache("c", nginx),
		steps: func(h *harness, g Gomega) {
			h.settleDown("c")
			h.annotate("c", v1alpha2.PurgeAnnotation, "")
			// The create ends first, then the purge runs.
			h.completeAll("c")
			h.settleDown("c")
			g.Expect(h.status("c").Reason).To(Equal(v1alpha2.ImageCacheReasonImageCachePurge))
			g.Expect(h.nodeState("c", "new")).To(Equal(done()), "a running purge wants nothing")
			h.completeAll("c")
			h.settleDown("c")
			g.Expect(h.running("c")).To(BeFalse())
		},
		want: waiting, notified: []string{"new"},
	}, {
		name:  "a released node's record goes; it is covered",
		nodes: []*corev1.Node{node("new", heldByTaint)},
		cache: imageCache("c", nginx),
		steps: func(h *harness, g Gomega) {
			h.succeed("c")
			h.editNode("new", released)
			g.Expect(h.r.Held.Records()).To(BeZero())
		},
		want: done(), notified: []string{"new"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			h := heldHarness(t, startupConfig(), tt.nodes...)
			h.create(tt.cache)
			tt.steps(h, g)
			g.Expect(h.nodeState("c", "new")).To(Equal(tt.want))
			g.Expect(heldledgertest.Woken(h.r.Held)).To(Equal(tt.notified))
			g.Expect(h.r.Held.State(h.req("c").NamespacedName, "another-uid", "new")).To(Equal(hold.CacheState{}),
				"a cache recreated under the name is another cache")
		})
	}
}

// A restart loses the records: the held node, created long before the
// cache's last operation, is found again from its taint and gets a new-node
// operation of its own, on it alone.
func TestHeldNodeAfterRestart(t *testing.T) {
	g := NewWithT(t)
	const img = "nginx:1.27"
	h := heldHarness(t, startupConfig(), node("a"), node("new", heldByTaint))
	h.create(imageCache("c", img))
	h.settleDown("c")
	g.Expect(h.nodeState("c", "new")).To(Equal(hold.CacheState{Known: true, Pending: []string{img}}))
	h.succeed("c")

	// A new process: nothing in memory. The earlier Jobs are gone (the
	// start-up clean-up deletes them).
	for _, j := range h.jobs("c") {
		g.Expect(h.api.Delete(h.ctx, &j)).To(Succeed())
	}
	h.advance(time.Minute)
	cfg := h.r.Config
	h.r = &Reconciler{Client: h.r.Client, APIReader: h.r.APIReader, Jobs: h.r.Jobs, Recorder: h.rec, Clock: h.clock, Config: cfg,
		Held: heldledger.New()}
	h.r.init()
	g.Expect(h.nodeState("c", "new")).To(Equal(hold.CacheState{}), "unknown until the cache is looked at")

	h.settleDown("c")
	g.Expect(h.status("c").Reason).To(Equal(v1alpha2.ImageCacheReasonImageCacheNewNodes))
	g.Expect(h.jobs("c")).To(HaveExactElements(HaveField("Annotations", HaveKeyWithValue("kubefledged.io/node", "new"))),
		"a Job on the held node only")
	g.Expect(h.nodeState("c", "new")).To(Equal(hold.CacheState{Known: true, Pending: []string{img}}))
	h.succeed("c")
	g.Expect(h.nodeState("c", "new")).To(Equal(hold.CacheState{Known: true, Done: true}))
	g.Expect(heldledgertest.Woken(h.r.Held)).To(Equal([]string{"new"}))
	g.Expect(h.nodeState("c", "a")).To(Equal(hold.CacheState{Known: true, Done: true}), "a node not held is covered")
}
