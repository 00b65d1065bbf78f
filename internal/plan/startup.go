package plan

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// StartupTaint is --node-startup-taint: the taint a node pool registers its
// new nodes with, so that no pod lands on them before their images are
// cached; the controller removes it once they are. It changes which nodes
// are eligible: the pull Jobs tolerate it beside their list's tolerations,
// so it never keeps a node from a list, and a node that carries it is new to
// every cache that has not served it yet, whatever its age.
type StartupTaint struct {
	Key string
	// Effect narrows the taint to one effect; empty matches the key with
	// any effect (and any value), which is what a node pool configured with
	// a value or an effect we were not told of still puts on.
	Effect corev1.TaintEffect
}

// ParseStartupTaint reads KEY[:EFFECT]; "" means off (nil). The key is a
// label-style qualified name. A value is refused rather than ignored: the
// controller tolerates and removes the key's taint whatever its value, and
// accepting one would suggest that it matched on it.
func ParseStartupTaint(s string) (*StartupTaint, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	key, effect, hasEffect := strings.Cut(s, ":")
	if strings.Contains(key, "=") {
		return nil, fmt.Errorf("%q has a value: give KEY[:EFFECT] only, the taint is matched and removed by its key whatever its value", s)
	}
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return nil, fmt.Errorf("%q: the key %q is not a valid taint key: %s", s, key, strings.Join(errs, "; "))
	}
	t := &StartupTaint{Key: key}
	if hasEffect {
		switch e := corev1.TaintEffect(effect); e {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
			t.Effect = e
		default:
			return nil, fmt.Errorf("%q: the effect %q is not one of NoSchedule, PreferNoSchedule, NoExecute", s, effect)
		}
	}
	return t, nil
}

// String gives the taint back as the flag takes it.
func (s *StartupTaint) String() string {
	if s == nil {
		return ""
	}
	if s.Effect == "" {
		return s.Key
	}
	return s.Key + ":" + string(s.Effect)
}

// Matches says whether a taint is the startup taint. A nil StartupTaint
// (the feature off) matches nothing.
func (s *StartupTaint) Matches(t *corev1.Taint) bool {
	return s != nil && t.Key == s.Key && (s.Effect == "" || t.Effect == s.Effect)
}

// On says whether the node carries the startup taint.
func (s *StartupTaint) On(n *corev1.Node) bool {
	if s == nil {
		return false
	}
	for i := range n.Spec.Taints {
		if s.Matches(&n.Spec.Taints[i]) {
			return true
		}
	}
	return false
}

// Toleration is what the pull Jobs add to their list's tolerations so that
// they run on a node still held by the taint: Exists, so that any value a
// node pool gives it is tolerated as the removal ignores it too.
func (s *StartupTaint) Toleration() corev1.Toleration {
	return corev1.Toleration{Key: s.Key, Operator: corev1.TolerationOpExists, Effect: s.Effect}
}
