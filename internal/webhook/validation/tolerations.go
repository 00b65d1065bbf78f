package validation

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
)

// validateTolerations applies the API server's own rules for pod
// tolerations to each list's, so that a bad one is refused here rather than
// failing every Job the list makes.
func validateTolerations(spec *v1alpha2.ImageCacheSpec) field.ErrorList {
	var errs field.ErrorList
	for i := range spec.CacheSpec {
		for j, t := range spec.CacheSpec[i].Tolerations {
			p := cacheSpecPath.Index(i).Child("tolerations").Index(j)
			errs = append(errs, validateToleration(t, p)...)
		}
	}
	return errs
}

func validateToleration(t corev1.Toleration, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Key != "" {
		for _, msg := range validation.IsQualifiedName(t.Key) {
			errs = append(errs, field.Invalid(p.Child("key"), t.Key, msg))
		}
	}
	switch t.Operator {
	case corev1.TolerationOpEqual, "":
		if t.Key == "" {
			errs = append(errs, field.Invalid(p.Child("operator"), t.Operator,
				"an empty key needs operator Exists (tolerate every taint)"))
		}
		for _, msg := range validation.IsValidLabelValue(t.Value) {
			errs = append(errs, field.Invalid(p.Child("value"), t.Value, msg))
		}
	case corev1.TolerationOpExists:
		if t.Value != "" {
			errs = append(errs, field.Invalid(p.Child("value"), t.Value, "must be empty when operator is Exists"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("operator"), t.Operator, []string{string(corev1.TolerationOpEqual), string(corev1.TolerationOpExists)}))
	}
	switch t.Effect {
	case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		errs = append(errs, field.NotSupported(p.Child("effect"), t.Effect, []string{string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectPreferNoSchedule), string(corev1.TaintEffectNoExecute)}))
	}
	if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
		errs = append(errs, field.Invalid(p.Child("tolerationSeconds"), *t.TolerationSeconds,
			fmt.Sprintf("only allowed with effect %s", corev1.TaintEffectNoExecute)))
	}
	return errs
}

// tolerationsEqual treats nil and empty alike, like specEqual.
func tolerationsEqual(a, b []corev1.Toleration) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return equality.Semantic.DeepEqual(a, b)
}

// validateTolerationsUnchanged holds tolerations to the node selector's rule:
// they too decide which nodes a list reaches, and an update only deletes what
// a list lost on the nodes it reaches now, so a list that stopped tolerating
// a taint would leave its images on the tainted nodes for good.
func validateTolerationsUnchanged(oldSpec, newSpec *v1alpha2.ImageCacheSpec) field.ErrorList {
	var errs field.ErrorList
	for i := range min(len(oldSpec.CacheSpec), len(newSpec.CacheSpec)) {
		o, n := oldSpec.CacheSpec[i].Tolerations, newSpec.CacheSpec[i].Tolerations
		if tolerationsEqual(o, n) {
			continue
		}
		if n == nil {
			n = []corev1.Toleration{}
		}
		errs = append(errs, field.Invalid(cacheSpecPath.Index(i).Child("tolerations"), n,
			fmt.Sprintf("a list's tolerations cannot change (they were %s); only its images may change: "+
				"to cache on other nodes, purge this ImageCache and create another", tolerationsString(o))))
	}
	return errs
}

// tolerationsString spells out "none" for an empty list, as selectorString
// does for "all nodes": a bare [] or null is easy to misread.
func tolerationsString(ts []corev1.Toleration) string {
	if len(ts) == 0 {
		return "[] (none)"
	}
	b, err := json.Marshal(ts)
	if err != nil {
		return fmt.Sprintf("%v", ts)
	}
	return string(b)
}
