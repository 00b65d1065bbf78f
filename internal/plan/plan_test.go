package plan

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
)

func node(name string, labels map[string]string, images ...string) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	n.Status.NodeInfo.ContainerRuntimeVersion = "containerd://1.7.0"
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if len(images) > 0 {
		n.Status.Images = []corev1.ContainerImage{{Names: images}}
	}
	return n
}

func keys(p Plan) []string {
	var out []string
	for _, w := range p.Work {
		out = append(out, string(w.Kind)+" "+w.Image+" "+w.Node.Name)
	}
	return out
}

func TestBuild(t *testing.T) {
	nodes := []corev1.Node{
		node("a", map[string]string{"tier": "web"}, "docker.io/library/nginx:1.21"),
		node("b", map[string]string{"tier": "db"}),
	}
	spec := func(lists ...v1alpha2.CacheSpecImages) v1alpha2.ImageCacheSpec {
		return v1alpha2.ImageCacheSpec{CacheSpec: lists}
	}
	cordoned := node("cordoned", map[string]string{"tier": "web"})
	cordoned.Spec.Unschedulable = true
	notReady := node("notready", map[string]string{"tier": "web"})
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	tainted := node("tainted", map[string]string{"tier": "web"})
	tainted.Spec.Taints = []corev1.Taint{{Key: "gpu", Value: "yes", Effect: corev1.TaintEffectNoSchedule}}
	soft := node("soft", map[string]string{"tier": "web"})
	soft.Spec.Taints = []corev1.Taint{{Key: "x", Effect: corev1.TaintEffectPreferNoSchedule}}
	mixed := []corev1.Node{nodes[0], cordoned, notReady, tainted, soft}
	windows := node("win", map[string]string{"tier": "web", "kubernetes.io/os": "windows"})
	unlabelledWindows := node("win2", map[string]string{"tier": "web"})
	unlabelledWindows.Status.NodeInfo.OperatingSystem = "windows"
	arch := func(name, label, reported string) corev1.Node {
		n := node(name, map[string]string{"tier": "web"})
		if label != "" {
			n.Labels[corev1.LabelArchStable] = label
		}
		n.Status.NodeInfo.Architecture = reported
		return n
	}
	// Every architecture the image holds, one node each, and three it does
	// not: by label, by status alone, and a label that overrides the status.
	served := []corev1.Node{arch("amd64", "amd64", "amd64"), arch("arm64", "arm64", ""), arch("arm", "arm", "arm"),
		arch("ppc64le", "", "ppc64le"), arch("s390x", "s390x", "s390x"), arch("unknown", "", "")}
	unserved := []corev1.Node{arch("riscv", "riscv64", "riscv64"), arch("mips", "", "mips64le"), arch("relabelled", "loong64", "amd64")}
	allArches := append(append([]corev1.Node{}, served...), unserved...)
	windowsARM := node("win-arm", map[string]string{"kubernetes.io/os": "windows", "kubernetes.io/arch": "riscv64"})
	virtualTainted := node("vk", nil)
	virtualTainted.Spec.Taints = []corev1.Taint{{Key: "virtual-kubelet.io/provider", Value: "azure", Effect: corev1.TaintEffectNoSchedule}}
	riscvOnly := arch("riscv-only", "riscv64", "riscv64")
	riscvOnly.Labels["pool"] = "riscv"
	gpu := []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpEqual, Value: "yes", Effect: corev1.TaintEffectNoSchedule}}
	other := []corev1.Toleration{{Key: "other", Operator: corev1.TolerationOpExists}}
	caching := &StartupTaint{Key: "kubefledged.io/caching", Effect: corev1.TaintEffectNoSchedule}
	held := node("held", map[string]string{"tier": "web"})
	held.Spec.Taints = []corev1.Taint{{Key: "kubefledged.io/caching", Effect: corev1.TaintEffectNoSchedule}}
	heldGPU := node("held-gpu", map[string]string{"tier": "web"})
	heldGPU.Spec.Taints = []corev1.Taint{{Key: "kubefledged.io/caching", Effect: corev1.TaintEffectNoSchedule}, tainted.Spec.Taints[0]}
	heldOtherEffect := node("held-noexecute", map[string]string{"tier": "web"})
	heldOtherEffect.Spec.Taints = []corev1.Taint{{Key: "kubefledged.io/caching", Effect: corev1.TaintEffectNoExecute}}
	startupNodes := []corev1.Node{nodes[0], held, heldGPU, heldOtherEffect}
	withRedis := []corev1.Node{node("a", map[string]string{"tier": "web"}, "docker.io/library/redis:7"), node("b", map[string]string{"tier": "db"}, "redis:7")}
	cordonedWithNginx := node("cordoned-nginx", nil, "nginx:1.21")
	cordonedWithNginx.Spec.Unschedulable = true
	cases := []struct {
		name          string
		in            Input
		want          []string
		wantPresent   int
		wantInvalid   []string
		wantSkipped   int
		wantSkippedBy map[string]string
		wantUnmatched []string
		wantUnreach   []string
		// wantLacking, when nil, is wantSkippedBy for pulls (no skipped
		// node of these cases reports its image) and nothing for a purge.
		wantLacking map[string]string
	}{
		{
			name:        "cordoned and NotReady nodes are skipped and counted; taints tolerated by default",
			in:          Input{Op: Create, Spec: spec(v1alpha2.CacheSpecImages{Images: []string{"redis:7"}}), Nodes: mixed},
			want:        []string{"pull redis:7 a", "pull redis:7 tainted", "pull redis:7 soft"},
			wantSkipped: 2, wantSkippedBy: map[string]string{"cordoned": "Cordoned", "notready": "NotReady"},
		},
		{
			name: "nodes that are not Linux are skipped: our helpers are Linux binaries",
			in:   Input{Op: Create, Spec: spec(v1alpha2.CacheSpecImages{Images: []string{"redis:7"}}), Nodes: []corev1.Node{nodes[0], windows, unlabelledWindows}},
			want: []string{"pull redis:7 a"}, wantSkipped: 2, wantSkippedBy: map[string]string{"win": "NotLinux", "win2": "NotLinux"},
		},
		{
			name: "a list that selects only Windows nodes says so",
			in: Input{Op: Create, Spec: spec(v1alpha2.CacheSpecImages{Images: []string{"redis:7"}, NodeSelector: map[string]string{"kubernetes.io/os": "windows"}}),
				Nodes: []corev1.Node{nodes[0], windows}},
			wantSkipped: 1, wantSkippedBy: map[string]string{"win": "NotLinux"},
			wantUnmatched: []string{"cacheSpec[0] (nodeSelector kubernetes.io/os=windows) matches 1 node(s), none eligible: 1 NotLinux"},
		},
		{
			name:        "nodes of an architecture the image does not hold are skipped: their Jobs could never start",
			in:          Input{Op: Create, Spec: spec(v1alpha2.CacheSpecImages{Images: []string{"redis:7"}}), Nodes: allArches},
			want:        []string{"pull redis:7 amd64", "pull redis:7 arm64", "pull redis:7 arm", "pull redis:7 ppc64le", "pull redis:7 s390x", "pull redis:7 unknown"},
			wantSkipped: 3, wantSkippedBy: map[string]string{"riscv": "UnsupportedArch", "mips": "UnsupportedArch", "relabelled": "UnsupportedArch"},
		},
		{
			name: "new nodes of an unsupported architecture are skipped too",
			in: Input{Op: NewNodes, Spec: spec(v1alpha2.CacheSpecImages{Images: []string{"redis:7"}}), Nodes: allArches,
				Only: map[string]bool{"riscv": true, "s390x": true}},
			want: []string{"pull redis:7 s390x"}, wantSkipped: 1, wantSkippedBy: map[string]string{"riscv": "UnsupportedArch"},
		},
		{
			name: "a list that selects only nodes of an unsupported architecture says so",
			in: Input{Op: Create, Spec: spec(v1alpha2.CacheSpecImages{Images: []string{"redis:7"}, NodeSelector: map[string]string{"pool": "riscv"}}),
				Nodes: []corev1.Node{nodes[0], riscvOnly}},
			wantSkipped: 1, wantSkippedBy: map[string]string{"riscv-only": "UnsupportedArch"},
			wantUnmatched: []string{"cacheSpec[0] (nodeSelector pool=riscv) matches 1 node(s), none eligible: 1 UnsupportedArch"},
		},
		{
			name: "virtual nodes are skipped, by label or by taint, for pulls and deletes alike",
			in: Input{Op: Create, Spec: spec(v1alpha2.CacheSpecImages{Images: []string{"redis:7"}}), Nodes: []corev1.Node{nodes[0],
				node("fargate", map[string]string{"eks.amazonaws.com/compute-type": "fargate"}),
				node("aci", map[string]string{"type": "virtual-kubelet"}), virtualTainted}},
			want: []string{"pull redis:7 a"}, wantSkipped: 3,
			wantSkippedBy: map[string]string{"fargate": "VirtualNode", "aci": "VirtualNode", "vk": "VirtualNode"},
		},
		{
			name:        "a purge leaves out virtual nodes: no runtime socket there",
			in:          Input{Op: Purge, Spec: spec(v1alpha2.CacheSpecImages{Images: []string{"redis:7"}}), Nodes: []corev1.Node{nodes[0], virtualTainted}},
			want:        []string{"delete redis:7 a"},
			wantSkipped: 1, wantSkippedBy: map[string]string{"vk": "VirtualNode"},
		},
		{
			name:        "a Windows node is NotLinux whatever its architecture",
			in:          Input{Op: Create, Spec: spec(v1alpha2.CacheSpecImages{Images: []string{"redis:7"}}), Nodes: []corev1.Node{windowsARM}},
			wantSkipped: 1, wantSkippedBy: map[string]string{"win-arm": "NotLinux"},
			wantUnmatched: []string{"cacheSpec[0] (no nodeSelector) matches 1 node(s), none eligible: 1 NotLinux"},
		},
		{
			name:        "purge leaves out nodes of an unsupported architecture: its delete Jobs could not start there either",
			in:          Input{Op: Purge, Spec: spec(v1alpha2.CacheSpecImages{Images: []string{"redis:7"}}), Nodes: []corev1.Node{served[0], unserved[0]}},
			want:        []string{"delete redis:7 amd64"},
			wantSkipped: 1, wantSkippedBy: map[string]string{"riscv": "UnsupportedArch"},
		},
		{
			name:        "purge reaches cordoned and tainted nodes; a NotReady one keeps its images and fails",
			in:          Input{Op: Purge, Spec: spec(v1alpha2.CacheSpecImages{Images: []string{"redis:7"}, Tolerations: other}), Nodes: append(mixed, windows)},
			want:        []string{"delete redis:7 a", "delete redis:7 cordoned", "delete redis:7 tainted", "delete redis:7 soft"},
			wantSkipped: 1, wantSkippedBy: map[string]string{"win": "NotLinux"}, wantUnreach: []string{"redis:7 notready NodeNotReady"},
		},
		{
			name:        "with tolerations only tolerated taints are used",
			in:          Input{Op: Create, Spec: spec(v1alpha2.CacheSpecImages{Images: []string{"redis:7"}, Tolerations: other}), Nodes: mixed},
			want:        []string{"pull redis:7 a", "pull redis:7 soft"},
			wantSkipped: 3, wantSkippedBy: map[string]string{"cordoned": "Cordoned", "notready": "NotReady", "tainted": "TaintNotTolerated"},
		},
		{
			name:        "a toleration that matches the taint admits the node",
			in:          Input{Op: Create, Spec: spec(v1alpha2.CacheSpecImages{Images: []string{"redis:7"}, Tolerations: gpu}), Nodes: mixed},
			want:        []string{"pull redis:7 a", "pull redis:7 tainted", "pull redis:7 soft"},
			wantSkipped: 2, wantSkippedBy: map[string]string{"cordoned": "Cordoned", "notready": "NotReady"},
		},
		{
			name: "new nodes: only the given nodes get work",
			in:   Input{Op: NewNodes, Spec: spec(v1alpha2.CacheSpecImages{Images: []string{"redis:7"}}), Nodes: nodes, Only: map[string]bool{"b": true}},
			want: []string{"pull redis:7 b"},
		},
		{
			name: "create pulls every image on every matching node, skipping present ones",
			in:   Input{Op: Create, Spec: spec(v1alpha2.CacheSpecImages{Images: []string{"nginx:1.21", "redis:7"}}), Nodes: nodes},
			want: []string{"pull redis:7 a", "pull nginx:1.21 b", "pull redis:7 b"}, wantPresent: 1,
		},
		{
			name: "Always policy skips nothing",
			in:   Input{Op: Refresh, Spec: spec(v1alpha2.CacheSpecImages{Images: []string{"nginx:1.21"}}), Nodes: nodes, AlwaysPull: true},
			want: []string{"pull nginx:1.21 a", "pull nginx:1.21 b"},
		},
		{
			name: "latest is always pulled even when present",
			in:   Input{Op: Refresh, Spec: spec(v1alpha2.CacheSpecImages{Images: []string{"busybox"}}), Nodes: []corev1.Node{node("a", nil, "docker.io/library/busybox:latest")}},
			want: []string{"pull busybox a"},
		},
		{
			name: "node selector restricts the nodes",
			in:   Input{Op: Create, Spec: spec(v1alpha2.CacheSpecImages{Images: []string{"redis:7"}, NodeSelector: map[string]string{"tier": "db"}}), Nodes: nodes},
			want: []string{"pull redis:7 b"},
		},
		{
			name:          "a selector matching no node gives no work, and says so",
			in:            Input{Op: Create, Spec: spec(v1alpha2.CacheSpecImages{Images: []string{"redis:7"}, NodeSelector: map[string]string{"tier": "none"}}), Nodes: nodes},
			wantUnmatched: []string{"cacheSpec[0] (nodeSelector tier=none) matches no node"},
		},
		{
			name: "the same image twice (after normalisation) is one job per node",
			in: Input{Op: Create, Spec: spec(
				v1alpha2.CacheSpecImages{Images: []string{"redis:7"}},
				v1alpha2.CacheSpecImages{Images: []string{"docker.io/library/redis:7"}, NodeSelector: map[string]string{"tier": "db"}},
			), Nodes: nodes},
			want: []string{"pull redis:7 a", "pull redis:7 b"},
		},
		{
			name: "purge deletes every image on matching nodes",
			in:   Input{Op: Purge, Spec: spec(v1alpha2.CacheSpecImages{Images: []string{"nginx:1.21"}, NodeSelector: map[string]string{"tier": "web"}}), Nodes: nodes},
			want: []string{"delete nginx:1.21 a"},
		},
		{
			name: "update pulls what a list gains and deletes what it loses; what the nodes report is not pulled again",
			in: Input{Op: Update,
				Spec:  spec(v1alpha2.CacheSpecImages{Images: []string{"redis:7", "postgres:16"}}),
				Prior: &v1alpha2.ImageCacheSpec{CacheSpec: []v1alpha2.CacheSpecImages{{Images: []string{"redis:7", "mysql:8"}}}},
				Nodes: withRedis},
			want:        []string{"pull postgres:16 a", "pull postgres:16 b", "delete mysql:8 a", "delete mysql:8 b"},
			wantPresent: 2,
		},
		{
			name: "update with a new list pulls all of it; a lost list deletes all of it",
			in: Input{Op: Update,
				Spec: spec(v1alpha2.CacheSpecImages{Images: []string{"redis:7"}}, v1alpha2.CacheSpecImages{Images: []string{"memcached:1"}, NodeSelector: map[string]string{"tier": "db"}}),
				Prior: &v1alpha2.ImageCacheSpec{CacheSpec: []v1alpha2.CacheSpecImages{{Images: []string{"redis:7"}}, {Images: []string{"x:1"}},
					{Images: []string{"y:1"}, NodeSelector: map[string]string{"tier": "web"}}}},
				Nodes: withRedis},
			want:        []string{"pull memcached:1 b", "delete x:1 a", "delete x:1 b", "delete y:1 a"},
			wantPresent: 2,
		},
		{
			// An edit of imagePullSecrets, a label or the order of a list
			// gains no image: a pair the last operation failed, or a node
			// lost since, must be pulled again all the same.
			name: "update with the same images pulls again every pair a node does not report",
			in: Input{Op: Update,
				Spec:  spec(v1alpha2.CacheSpecImages{Images: []string{"redis:7", "nginx:1.21"}}),
				Prior: &v1alpha2.ImageCacheSpec{CacheSpec: []v1alpha2.CacheSpecImages{{Images: []string{"nginx:1.21", "redis:7"}}}},
				Nodes: nodes},
			want:        []string{"pull redis:7 a", "pull redis:7 b", "pull nginx:1.21 b"},
			wantPresent: 1,
		},
		{
			name: "update: a list whose nodes are all left out says so, as a create does",
			in: Input{Op: Update,
				Spec:  spec(v1alpha2.CacheSpecImages{Images: []string{"redis:7"}, NodeSelector: map[string]string{"tier": "web"}}),
				Prior: &v1alpha2.ImageCacheSpec{CacheSpec: []v1alpha2.CacheSpecImages{{Images: []string{"redis:7"}, NodeSelector: map[string]string{"tier": "web"}}}},
				Nodes: []corev1.Node{cordoned, notReady}},
			wantSkipped: 2, wantSkippedBy: map[string]string{"cordoned": "Cordoned", "notready": "NotReady"},
			wantUnmatched: []string{"cacheSpec[0] (nodeSelector tier=web) matches 2 node(s), none eligible: 1 Cordoned, 1 NotReady"},
		},
		{
			name:        "a skipped node that reports the image does not lack it",
			in:          Input{Op: Refresh, Spec: spec(v1alpha2.CacheSpecImages{Images: []string{"nginx:1.21"}}), Nodes: []corev1.Node{cordonedWithNginx, notReady}},
			wantSkipped: 2, wantSkippedBy: map[string]string{"cordoned-nginx": "Cordoned", "notready": "NotReady"},
			wantLacking:   map[string]string{"notready": "NotReady"},
			wantUnmatched: []string{"cacheSpec[0] (no nodeSelector) matches 2 node(s), none eligible: 1 Cordoned, 1 NotReady"},
		},
		{
			name: "update after a purge (no prior spec) pulls everything",
			in:   Input{Op: Update, Spec: spec(v1alpha2.CacheSpecImages{Images: []string{"redis:7"}}), Nodes: nodes},
			want: []string{"pull redis:7 a", "pull redis:7 b"},
		},
		{
			name: "without a startup taint, a list with tolerations leaves held nodes out",
			in: Input{Op: Create, Spec: spec(v1alpha2.CacheSpecImages{Images: []string{"redis:7"}, Tolerations: gpu}),
				Nodes: startupNodes},
			want:        []string{"pull redis:7 a"},
			wantSkipped: 3, wantSkippedBy: map[string]string{"held": "TaintNotTolerated", "held-gpu": "TaintNotTolerated", "held-noexecute": "TaintNotTolerated"},
		},
		{
			name: "the startup taint is tolerated beside a list's tolerations, and only that taint and effect",
			in: Input{Op: Create, Spec: spec(v1alpha2.CacheSpecImages{Images: []string{"redis:7"}, Tolerations: gpu}),
				Nodes: startupNodes, StartupTaint: caching},
			want:        []string{"pull redis:7 a", "pull redis:7 held", "pull redis:7 held-gpu"},
			wantSkipped: 1, wantSkippedBy: map[string]string{"held-noexecute": "TaintNotTolerated"},
		},
		{
			name: "the startup taint does not make a taint of another key tolerated",
			in: Input{Op: Create, Spec: spec(v1alpha2.CacheSpecImages{Images: []string{"redis:7"}, Tolerations: other}),
				Nodes: startupNodes, StartupTaint: &StartupTaint{Key: "kubefledged.io/caching"}},
			want:        []string{"pull redis:7 a", "pull redis:7 held", "pull redis:7 held-noexecute"},
			wantSkipped: 1, wantSkippedBy: map[string]string{"held-gpu": "TaintNotTolerated"},
		},
		{
			name:        "invalid images are reported, not planned",
			in:          Input{Op: Create, Spec: spec(v1alpha2.CacheSpecImages{Images: []string{"Not A Ref", "redis:7"}}), Nodes: nodes[:1]},
			want:        []string{"pull redis:7 a"},
			wantInvalid: []string{"Not A Ref"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			p := Build(c.in)
			g.Expect(keys(p)).To(ConsistOf(c.want))
			g.Expect(p.Present).To(Equal(c.wantPresent))
			g.Expect(p.Skipped).To(Equal(c.wantSkipped))
			g.Expect(p.Unmatched).To(Equal(c.wantUnmatched))
			g.Expect(p.SkippedNodes).To(Equal(c.wantSkippedBy))
			wantLacking := c.wantLacking
			if wantLacking == nil && c.in.Op != Purge {
				wantLacking = c.wantSkippedBy
			}
			g.Expect(p.Lacking).To(Equal(wantLacking))
			var unreach []string
			for _, u := range p.Unreachable {
				unreach = append(unreach, u.Image+" "+u.Node+" "+u.Reason)
				g.Expect(u.Message).To(ContainSubstring("not Ready"))
			}
			g.Expect(unreach).To(ConsistOf(c.wantUnreach))
			g.Expect(p.Desired).To(Equal(len(c.want) + c.wantPresent + len(c.wantUnreach)))
			var invalid []string
			for k := range p.Invalid {
				invalid = append(invalid, k)
			}
			g.Expect(invalid).To(ConsistOf(c.wantInvalid))
			for _, w := range p.Work {
				g.Expect(w.Kind).To(BeElementOf(jobs.Pull, jobs.Delete))
				if w.Kind == jobs.Delete {
					// Delete Jobs tolerate every taint: see skipDelete.
					g.Expect(w.Tolerations).To(BeEmpty())
				}
			}
		})
	}
}

// TestAdded: what a running operation takes in when the images of its
// lists grow mid-way.
func TestAdded(t *testing.T) {
	web, db := map[string]string{"tier": "web"}, map[string]string{"tier": "db"}
	cordoned := node("cordoned", web)
	cordoned.Spec.Unschedulable = true
	nodes := []corev1.Node{node("a", web, "docker.io/library/nginx:1.28"), node("b", web), node("c", db), node("joining", web), cordoned}
	covered := map[string]bool{"a": true, "b": true, "c": true}
	list := func(sel map[string]string, images ...string) v1alpha2.CacheSpecImages {
		return v1alpha2.CacheSpecImages{Images: images, NodeSelector: sel}
	}
	have := v1alpha2.ImageCacheSpec{CacheSpec: []v1alpha2.CacheSpecImages{list(web, "redis:7", "nginx:1.27"), list(nil, "busybox:1.36")}}
	cases := []struct {
		name       string
		lists      []v1alpha2.CacheSpecImages
		alwaysPull bool
		want       []string
		present    int
		skipped    int
		skippedBy  map[string]string
		lacking    map[string]string
		invalid    []string
	}{
		{name: "nothing gained, nothing added", lists: have.CacheSpec},
		{name: "the same image spelt otherwise is no gain",
			lists: []v1alpha2.CacheSpecImages{list(web, "docker.io/library/redis:7", "nginx:1.27"), list(nil, "busybox:1.36")}},
		{name: "a gained image goes on the covered nodes of its list, not on a joining one; one a node reports is present",
			lists: []v1alpha2.CacheSpecImages{list(web, "redis:7", "nginx:1.27", "nginx:1.28"), list(nil, "busybox:1.36")},
			want:  []string{"pull nginx:1.28 b"}, present: 1,
			skipped: 1, skippedBy: map[string]string{"cordoned": v1alpha2.SkipCordoned}, lacking: map[string]string{"cordoned": v1alpha2.SkipCordoned}},
		{name: "with --image-pull-policy=Always, present or not",
			lists:      []v1alpha2.CacheSpecImages{list(web, "redis:7", "nginx:1.27", "nginx:1.28"), list(nil, "busybox:1.36")},
			alwaysPull: true, want: []string{"pull nginx:1.28 a", "pull nginx:1.28 b"},
			skipped: 1, skippedBy: map[string]string{"cordoned": v1alpha2.SkipCordoned}, lacking: map[string]string{"cordoned": v1alpha2.SkipCordoned}},
		{name: "an image another list has on a node already is not pulled there twice",
			lists:   []v1alpha2.CacheSpecImages{list(web, "redis:7", "nginx:1.27"), list(nil, "busybox:1.36", "redis:7")},
			want:    []string{"pull redis:7 c"},
			skipped: 1, skippedBy: map[string]string{"cordoned": v1alpha2.SkipCordoned}, lacking: map[string]string{"cordoned": v1alpha2.SkipCordoned}},
		{name: "an image lost is not the added work's business",
			lists: []v1alpha2.CacheSpecImages{list(web, "redis:7"), list(nil, "busybox:1.36")}},
		{name: "an image that does not parse fails, without work",
			lists:   []v1alpha2.CacheSpecImages{list(web, "redis:7", "nginx:1.27", "Not A Ref"), list(nil, "busybox:1.36")},
			invalid: []string{"Not A Ref"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			before := have.DeepCopy()
			p := Added(Input{Spec: v1alpha2.ImageCacheSpec{CacheSpec: c.lists}, Nodes: nodes, AlwaysPull: c.alwaysPull}, have, covered)
			g.Expect(keys(p)).To(ConsistOf(c.want))
			g.Expect(p.Present).To(Equal(c.present))
			g.Expect(p.Desired).To(Equal(len(c.want) + c.present))
			g.Expect(p.Skipped).To(Equal(c.skipped))
			g.Expect(p.SkippedNodes).To(Equal(c.skippedBy))
			g.Expect(p.Lacking).To(Equal(c.lacking))
			g.Expect(p.Unmatched).To(BeEmpty(), "told at the operation's start")
			var invalid []string
			for k := range p.Invalid {
				invalid = append(invalid, k)
			}
			g.Expect(invalid).To(ConsistOf(c.invalid))
			g.Expect(&have).To(Equal(before), "have is not written to")
		})
	}
}

func TestDue(t *testing.T) {
	started := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(started.Add(d)); return &t }
	prior := &v1alpha2.ImageCacheSpec{}
	cases := []struct {
		name      string
		cache     v1alpha2.ImageCache
		now       time.Duration
		every     time.Duration
		want      Operation
		wantDue   bool
		wantAfter time.Duration
		startedAt time.Duration // when the controller started, counted from `started`
	}{
		{name: "new cache is created", cache: v1alpha2.ImageCache{}, want: Create, wantDue: true},
		{name: "purge annotation wins over refresh", want: Purge, wantDue: true, cache: v1alpha2.ImageCache{
			ObjectMeta: metav1.ObjectMeta{Generation: 1, Annotations: map[string]string{v1alpha2.PurgeAnnotation: "", v1alpha2.RefreshAnnotation: ""}},
			Status:     v1alpha2.ImageCacheStatus{Status: "Succeeded", ObservedGeneration: 1, ProcessedSpec: prior, CompletionTime: at(time.Minute)}}},
		{name: "spec change is an update", want: Update, wantDue: true, cache: v1alpha2.ImageCache{
			ObjectMeta: metav1.ObjectMeta{Generation: 2},
			Status:     v1alpha2.ImageCacheStatus{Status: "Succeeded", ObservedGeneration: 1, ProcessedSpec: prior, CompletionTime: at(time.Minute)}}},
		{name: "refresh annotation", want: Refresh, wantDue: true, cache: v1alpha2.ImageCache{
			ObjectMeta: metav1.ObjectMeta{Generation: 1, Annotations: map[string]string{v1alpha2.RefreshAnnotation: "x"}},
			Status:     v1alpha2.ImageCacheStatus{Status: "Failed", ObservedGeneration: 1, ProcessedSpec: prior, CompletionTime: at(time.Minute)}}},
		{name: "aborted create runs as create", want: Create, wantDue: true, cache: v1alpha2.ImageCache{
			ObjectMeta: metav1.ObjectMeta{Generation: 1},
			Status:     v1alpha2.ImageCacheStatus{Status: "Aborted", Reason: v1alpha2.ImageCacheReasonImagePullAborted}}},
		{name: "aborted refresh runs as refresh", want: Refresh, wantDue: true, cache: v1alpha2.ImageCache{
			ObjectMeta: metav1.ObjectMeta{Generation: 1},
			Status:     v1alpha2.ImageCacheStatus{Status: "Aborted", ObservedGeneration: 1, ProcessedSpec: prior, CompletionTime: at(time.Minute)}}},
		{name: "periodic refresh not yet due", now: 5 * time.Minute, every: 10 * time.Minute, wantAfter: 6 * time.Minute, cache: v1alpha2.ImageCache{
			ObjectMeta: metav1.ObjectMeta{Generation: 1},
			Status:     v1alpha2.ImageCacheStatus{Status: "Succeeded", ObservedGeneration: 1, ProcessedSpec: prior, CompletionTime: at(time.Minute)}}},
		{name: "periodic refresh due", now: 12 * time.Minute, every: 10 * time.Minute, want: Refresh, wantDue: true, cache: v1alpha2.ImageCache{
			ObjectMeta: metav1.ObjectMeta{Generation: 1},
			Status:     v1alpha2.ImageCacheStatus{Status: "Succeeded", ObservedGeneration: 1, ProcessedSpec: prior, CompletionTime: at(time.Minute)}}},
		{name: "refresh at start-up for caches finished before it", every: 10 * time.Minute, want: Refresh, wantDue: true, cache: v1alpha2.ImageCache{
			ObjectMeta: metav1.ObjectMeta{Generation: 1},
			Status:     v1alpha2.ImageCacheStatus{Status: "Succeeded", ObservedGeneration: 1, ProcessedSpec: prior, CompletionTime: at(-time.Hour)}}},
		{name: "new-node operations do not postpone the periodic refresh", now: 12 * time.Minute, every: 10 * time.Minute, want: Refresh, wantDue: true, cache: v1alpha2.ImageCache{
			ObjectMeta: metav1.ObjectMeta{Generation: 1},
			Status: v1alpha2.ImageCacheStatus{Status: "Succeeded", Reason: string(NewNodes), ObservedGeneration: 1, ProcessedSpec: prior,
				RefreshedTime: at(time.Minute), CompletionTime: at(11 * time.Minute)}}},
		{name: "0s turns refresh off", now: time.Hour, every: 0, cache: v1alpha2.ImageCache{
			ObjectMeta: metav1.ObjectMeta{Generation: 1},
			Status:     v1alpha2.ImageCacheStatus{Status: "Succeeded", ObservedGeneration: 1, ProcessedSpec: prior, CompletionTime: at(-time.Hour)}}},
		{name: "no periodic refresh after a purge", now: time.Hour, every: time.Minute, cache: v1alpha2.ImageCache{
			ObjectMeta: metav1.ObjectMeta{Generation: 1},
			Status:     v1alpha2.ImageCacheStatus{Status: "Succeeded", Reason: string(Purge), ObservedGeneration: 1, CompletionTime: at(time.Minute)}}},
		{name: "a refresh that ended in the second of the start is not run again", now: 900 * time.Millisecond, every: 10 * time.Minute,
			wantAfter: 10*time.Minute - 900*time.Millisecond, startedAt: 600 * time.Millisecond, cache: v1alpha2.ImageCache{
				ObjectMeta: metav1.ObjectMeta{Generation: 1},
				Status: v1alpha2.ImageCacheStatus{Status: "Succeeded", ObservedGeneration: 1, ProcessedSpec: prior,
					RefreshedTime: at(0), CompletionTime: at(0)}}},
		// The original wrote status with the whole object: every write
		// bumped the generation, and no observedGeneration was kept.
		{name: "the original's cache is refreshed at start-up, not updated", every: 15 * time.Minute, want: Refresh, wantDue: true, cache: v1alpha2.ImageCache{
			ObjectMeta: metav1.ObjectMeta{Generation: 3},
			Status:     v1alpha2.ImageCacheStatus{Status: "Succeeded", Reason: string(Create), StartTime: at(-time.Hour), CompletionTime: at(-time.Hour)}}},
		{name: "the original's failed cache is refreshed at start-up", every: 15 * time.Minute, want: Refresh, wantDue: true, cache: v1alpha2.ImageCache{
			ObjectMeta: metav1.ObjectMeta{Generation: 5},
			Status:     v1alpha2.ImageCacheStatus{Status: "Failed", Reason: string(Refresh), StartTime: at(-time.Hour), CompletionTime: at(-time.Hour)}}},
		{name: "the original's purged cache is left alone", now: time.Hour, every: 15 * time.Minute, cache: v1alpha2.ImageCache{
			ObjectMeta: metav1.ObjectMeta{Generation: 4},
			Status:     v1alpha2.ImageCacheStatus{Status: "Succeeded", Reason: string(Purge), StartTime: at(-time.Hour), CompletionTime: at(-time.Hour)}}},
		{name: "the original's cache without refresh: nothing due", now: time.Hour, every: 0, cache: v1alpha2.ImageCache{
			ObjectMeta: metav1.ObjectMeta{Generation: 3},
			Status:     v1alpha2.ImageCacheStatus{Status: "Succeeded", Reason: string(Create), StartTime: at(-time.Hour), CompletionTime: at(-time.Hour)}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			op, due, after := Due(&c.cache, Timing{Now: started.Add(c.now), Started: started.Add(c.startedAt), RefreshEvery: c.every})
			g.Expect(due).To(Equal(c.wantDue))
			g.Expect(op).To(Equal(c.want))
			g.Expect(after).To(Equal(c.wantAfter))
		})
	}
}

func TestExistedAt(t *testing.T) {
	start := metav1.NewTime(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	nodeAt := func(name string, created time.Duration) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(start.Add(created))}}
	}
	held := nodeAt("old-held", -time.Hour)
	held.Spec.Taints = []corev1.Taint{{Key: "kubefledged.io/caching", Effect: corev1.TaintEffectNoSchedule}}
	nodes := []corev1.Node{nodeAt("old", -time.Hour), nodeAt("same-second", 300*time.Millisecond), nodeAt("new", time.Minute), nodeAt("not-eligible", -time.Hour), held}
	eligible := map[string]bool{"old": true, "same-second": true, "new": true, "old-held": true}
	tests := []struct {
		name    string
		start   *metav1.Time
		startup *StartupTaint
		want    map[string]bool
	}{
		{"nodes created before the start", &start, nil, map[string]bool{"old": true, "old-held": true}},
		{"no start time: every eligible node", nil, nil, eligible},
		{"a node still held is new, whatever its age", &start, &StartupTaint{Key: "kubefledged.io/caching"}, map[string]bool{"old": true}},
		{"a taint of the key with another effect is not the startup taint", nil, &StartupTaint{Key: "kubefledged.io/caching", Effect: corev1.TaintEffectNoExecute}, eligible},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(ExistedAt(nodes, eligible, tt.start, tt.startup)).To(Equal(tt.want))
		})
	}
}

func TestParseStartupTaint(t *testing.T) {
	tests := []struct {
		in      string
		want    *StartupTaint
		wantErr string
	}{
		{in: "", want: nil},
		{in: "  ", want: nil},
		{in: "kubefledged.io/caching:NoSchedule", want: &StartupTaint{Key: "kubefledged.io/caching", Effect: corev1.TaintEffectNoSchedule}},
		{in: "kubefledged.io/caching", want: &StartupTaint{Key: "kubefledged.io/caching"}},
		{in: "caching:NoExecute", want: &StartupTaint{Key: "caching", Effect: corev1.TaintEffectNoExecute}},
		{in: "example.com/warm:PreferNoSchedule", want: &StartupTaint{Key: "example.com/warm", Effect: corev1.TaintEffectPreferNoSchedule}},
		{in: "kubefledged.io/caching:noschedule", wantErr: `the effect "noschedule" is not one of NoSchedule, PreferNoSchedule, NoExecute`},
		{in: "kubefledged.io/caching:", wantErr: `the effect "" is not one of`},
		{in: "kubefledged.io/caching=true:NoSchedule", wantErr: "has a value: give KEY[:EFFECT] only"},
		{in: "Bad Key:NoSchedule", wantErr: `the key "Bad Key" is not a valid taint key`},
		{in: ":NoSchedule", wantErr: `the key "" is not a valid taint key`},
		{in: "a/b/c", wantErr: `the key "a/b/c" is not a valid taint key`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ParseStartupTaint(tt.in)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
			if got != nil {
				again, err := ParseStartupTaint(got.String())
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(again).To(Equal(got), "String gives back what Parse takes")
			}
		})
	}
}

func TestStartupTaintMatches(t *testing.T) {
	g := NewWithT(t)
	var off *StartupTaint
	ns := corev1.Taint{Key: "kubefledged.io/caching", Value: "any", Effect: corev1.TaintEffectNoSchedule}
	ne := corev1.Taint{Key: "kubefledged.io/caching", Effect: corev1.TaintEffectNoExecute}
	g.Expect(off.Matches(&ns)).To(BeFalse(), "off matches nothing")
	g.Expect(off.On(&corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{ns}}})).To(BeFalse())
	g.Expect((&StartupTaint{Key: ns.Key}).Matches(&ns)).To(BeTrue(), "any effect, any value")
	g.Expect((&StartupTaint{Key: ns.Key}).Matches(&ne)).To(BeTrue())
	g.Expect((&StartupTaint{Key: ns.Key, Effect: corev1.TaintEffectNoSchedule}).Matches(&ne)).To(BeFalse())
	g.Expect((&StartupTaint{Key: "other"}).Matches(&ns)).To(BeFalse())
	tol := (&StartupTaint{Key: ns.Key, Effect: corev1.TaintEffectNoSchedule}).Toleration()
	g.Expect(tol.ToleratesTaint(klog.Background(), &ns, false)).To(BeTrue(), "the Jobs' toleration ignores the value")
	g.Expect(tol.ToleratesTaint(klog.Background(), &ne, false)).To(BeFalse())
}
