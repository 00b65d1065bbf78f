package plan

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/platform"
)

// Skip says why a list's pull Jobs may not run on a node that matches its
// selector, or "" when they may. Cordoned and NotReady nodes are left out (a
// Job there would only hang until the deadline, #205, #207); so is a node
// that is not Linux (our helpers are Linux binaries), whose architecture
// our image holds no binary for (its Jobs could never start) or that is
// virtual (it keeps no images for later pods), and, with tolerations,
// a node with a NoSchedule or NoExecute taint they do not tolerate.
func Skip(n *corev1.Node, l *v1alpha2.CacheSpecImages) string { return SkipWith(n, l, nil) }

// SkipWith is Skip for a controller run with a startup taint: the pull Jobs
// tolerate that taint whatever the list's tolerations, so it never leaves a
// node out. Without this, a list with tolerations would skip every new node
// of a pool that registers them with the taint, and never release them.
func SkipWith(n *corev1.Node, l *v1alpha2.CacheSpecImages, startup *StartupTaint) string {
	switch {
	case !Linux(n):
		return v1alpha2.SkipNotLinux
	case !ArchSupported(n):
		return v1alpha2.SkipUnsupportedArch
	case Virtual(n):
		return v1alpha2.SkipVirtualNode
	case !Ready(n):
		return v1alpha2.SkipNotReady
	case n.Spec.Unschedulable:
		return v1alpha2.SkipCordoned
	case !tolerates(n, l.Tolerations, startup):
		return v1alpha2.SkipTaintNotTolerated
	}
	return ""
}

// Eligible says whether a list's pull Jobs may run on a node that matches
// its selector (see Skip).
func Eligible(n *corev1.Node, l *v1alpha2.CacheSpecImages) bool { return Skip(n, l) == "" }

func tolerates(n *corev1.Node, tolerations []corev1.Toleration, startup *StartupTaint) bool {
	if len(tolerations) == 0 {
		return true
	}
	for i := range n.Spec.Taints {
		taint := &n.Spec.Taints[i]
		if taint.Effect == corev1.TaintEffectPreferNoSchedule || startup.Matches(taint) {
			continue
		}
		tolerated := false
		for j := range tolerations {
			if tolerations[j].ToleratesTaint(klog.Background(), taint, false) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			return false
		}
	}
	return true
}

// Linux says whether the node runs Linux. The kubelet sets the
// kubernetes.io/os label and status.nodeInfo.operatingSystem; a node with
// neither (a hand-made one) is taken for Linux, as the scheduler's default
// images would be.
func Linux(n *corev1.Node) bool {
	os := n.Labels[corev1.LabelOSStable]
	if os == "" {
		os = n.Status.NodeInfo.OperatingSystem
	}
	return os == "" || os == "linux"
}

// ArchSupported says whether our image holds a binary for the node's
// architecture: its kubernetes.io/arch label, or status.nodeInfo.architecture
// when the label is missing. A node with neither (a hand-made one) is taken
// to be supported, as it is taken for Linux.
func ArchSupported(n *corev1.Node) bool {
	arch := n.Labels[corev1.LabelArchStable]
	if arch == "" {
		arch = n.Status.NodeInfo.Architecture
	}
	return arch == "" || platform.HoldsArch(arch)
}

// Virtual says whether the node is a virtual kubelet's, which runs each pod
// in a sandbox of its own with no image store a later pod shares: EKS
// Fargate (eks.amazonaws.com/compute-type=fargate), AKS virtual nodes and
// other virtual-kubelet providers (the label type=virtual-kubelet, or their
// virtual-kubelet.io/provider taint). A pull Job there caches nothing, and
// fails or is billed; a delete Job cannot reach a runtime socket.
func Virtual(n *corev1.Node) bool {
	if n.Labels["eks.amazonaws.com/compute-type"] == "fargate" || n.Labels["type"] == "virtual-kubelet" {
		return true
	}
	for _, t := range n.Spec.Taints {
		if t.Key == "virtual-kubelet.io/provider" {
			return true
		}
	}
	return false
}

// Ready says whether the node's Ready condition is True.
func Ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Selects says whether a list's node selector matches the node (an empty
// selector matches every node).
func Selects(l *v1alpha2.CacheSpecImages, n *corev1.Node) bool {
	return len(l.NodeSelector) == 0 || labels.SelectorFromSet(l.NodeSelector).Matches(labels.Set(n.Labels))
}

// skipped are the nodes a list selects but an operation leaves out: node
// name to reason.
type skipped map[string]string

// split returns the nodes a list selects, parted into eligible and skipped.
// The eligible ones point into nodes: a copy of 1000 nodes at each call was
// most of what an operation's start allocated.
func split(nodes []corev1.Node, l *v1alpha2.CacheSpecImages, skip func(*corev1.Node, *v1alpha2.CacheSpecImages) string) (eligible []*corev1.Node, left skipped) {
	for i := range nodes {
		n := &nodes[i]
		if !Selects(l, n) {
			continue
		}
		if why := skip(n, l); why != "" {
			if left == nil {
				left = skipped{}
			}
			left[n.Name] = why
			continue
		}
		eligible = append(eligible, n)
	}
	return eligible, left
}

// EligibleNodes returns the names of the nodes any list of the spec would
// pull onto now; startup is the controller's startup taint, or nil.
func EligibleNodes(spec *v1alpha2.ImageCacheSpec, nodes []corev1.Node, startup *StartupTaint) map[string]bool {
	out := map[string]bool{}
	skip := func(n *corev1.Node, l *v1alpha2.CacheSpecImages) string { return SkipWith(n, l, startup) }
	for i := range spec.CacheSpec {
		e, _ := split(nodes, &spec.CacheSpec[i], skip)
		for _, n := range e {
			out[n.Name] = true
		}
	}
	return out
}

// ExistedAt returns the eligible nodes created before t: the nodes a cache's
// operation that started at t could cover. The controller uses it when it
// first sees a cache (after a start-up, with no memory of what its last
// operation covered) so that nodes that joined since are still caught up,
// whatever the timing of that first look. Without a start time, every
// eligible node counts. A node created in the same second counts as new: a
// needless pull is skipped or cheap, a missed one is not.
//
// A node that carries the startup taint never counts, whatever its age: it
// is still held, so the controller that held it may have stopped before its
// images were settled, and the taint itself is the record that they were
// not. Counted as new, it gets an operation of its own, whose end releases
// it; nothing in memory is needed to find it again.
func ExistedAt(nodes []corev1.Node, eligible map[string]bool, t *metav1.Time, startup *StartupTaint) map[string]bool {
	out := map[string]bool{}
	for i := range nodes {
		n := &nodes[i]
		if !eligible[n.Name] || startup.On(n) {
			continue
		}
		if t == nil || n.CreationTimestamp.Time.Truncate(time.Second).Before(t.Time.Truncate(time.Second)) {
			out[n.Name] = true
		}
	}
	return out
}
