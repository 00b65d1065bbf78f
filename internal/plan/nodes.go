package plan

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
)

// Eligible says whether a list's Jobs may run on a node that matches its
// selector. Cordoned and NotReady nodes are left out (a Job there would
// only hang until the deadline, #205, #207); with tolerations, so is a node
// with a NoSchedule or NoExecute taint they do not tolerate.
func Eligible(n *corev1.Node, l *v1alpha2.CacheSpecImages) bool {
	if n.Spec.Unschedulable || !Ready(n) {
		return false
	}
	if len(l.Tolerations) == 0 {
		return true
	}
	for i := range n.Spec.Taints {
		taint := &n.Spec.Taints[i]
		if taint.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		tolerated := false
		for j := range l.Tolerations {
			if l.Tolerations[j].ToleratesTaint(klog.Background(), taint, false) {
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

// split returns the nodes a list selects, parted into eligible and skipped.
// The eligible ones point into nodes: a copy of 1000 nodes at each call was
// most of what an operation's start allocated.
func split(nodes []corev1.Node, l *v1alpha2.CacheSpecImages) (eligible []*corev1.Node, skipped int) {
	for i := range nodes {
		n := &nodes[i]
		if !Selects(l, n) {
			continue
		}
		if Eligible(n, l) {
			eligible = append(eligible, n)
		} else {
			skipped++
		}
	}
	return eligible, skipped
}

// EligibleNodes returns the names of the nodes any list of the spec would
// use now.
func EligibleNodes(spec *v1alpha2.ImageCacheSpec, nodes []corev1.Node) map[string]bool {
	out := map[string]bool{}
	for i := range spec.CacheSpec {
		e, _ := split(nodes, &spec.CacheSpec[i])
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
func ExistedAt(nodes []corev1.Node, eligible map[string]bool, t *metav1.Time) map[string]bool {
	out := map[string]bool{}
	for i := range nodes {
		n := &nodes[i]
		if !eligible[n.Name] {
			continue
		}
		if t == nil || n.CreationTimestamp.Time.Truncate(time.Second).Before(t.Time.Truncate(time.Second)) {
			out[n.Name] = true
		}
	}
	return out
}
