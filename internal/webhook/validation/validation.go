// Package validation holds the admission rules for ImageCache as pure
// functions, so that every rule is tested without a cluster and the webhook is
// only plumbing around them.
//
// Every rejection is a field.Error of type Invalid: it carries the field path
// and the offending value, and its detail says what would be accepted, so a
// user reading `kubectl apply` output knows what to change without the docs.
//
// The CRD schema already enforces sizes and required fields before admission
// runs; the rules below repeat the ones the original webhook had (empty list)
// so that a CRD installed without its schema (an old chart) is still guarded.
package validation

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/images"
)

var (
	specPath        = field.NewPath("spec")
	cacheSpecPath   = specPath.Child("cacheSpec")
	pullSecretsPath = specPath.Child("imagePullSecrets")
)

// imageSyntax is appended to every reference error: the parser's reason says
// what is wrong, this says what a right one looks like.
const imageSyntax = "use [registry[:port]/]repository[:tag][@digest] in lower case, " +
	"e.g. nginx:1.27, quay.io/org/app:v1 or app@sha256:<64 hex digits>"

// specRule checks one part of a spec on its own. A new spec field (say,
// tolerations) gets its own rule appended to specRules; nothing else changes.
type specRule func(spec *v1alpha2.ImageCacheSpec) field.ErrorList

var specRules = []specRule{
	validateSize,
	validateCacheSpec,
	validatePullSecrets,
	validateTolerations,
}

// updateRule compares an old spec with a new one. Rules for fields that may
// not change go here.
type updateRule func(oldSpec, newSpec *v1alpha2.ImageCacheSpec) field.ErrorList

var updateRules = []updateRule{
	validateListCountUnchanged,
	validateNodeSelectorsUnchanged,
	validateTolerationsUnchanged,
}

// ValidateCreate returns everything wrong with a new ImageCache.
func ValidateCreate(ic *v1alpha2.ImageCache) field.ErrorList {
	return validateSpec(&ic.Spec)
}

// ValidateUpdate returns everything wrong with an update from old to new.
//
// The cache's status plays no part: GitOps tools (Argo CD, Flux, kubectl
// apply in a pipeline) write whenever the source changes, and a refusal
// while an operation runs turned every such write into a failed sync. The
// controller queues a spec edit or a refresh or purge annotation that arrives
// during an operation and acts on it when the operation ends.
//
// Content rules run only when the spec changed: an ImageCache stored before
// this webhook existed (or before a rule was tightened) must stay writable for
// the controller, which only removes annotations and never touches the spec.
// Status writes go through the status subresource, which the webhook does not
// intercept, so they never reach this function.
func ValidateUpdate(oldIC, newIC *v1alpha2.ImageCache) field.ErrorList {
	if specEqual(&oldIC.Spec, &newIC.Spec) {
		return nil
	}
	var errs field.ErrorList
	for _, rule := range updateRules {
		errs = append(errs, rule(&oldIC.Spec, &newIC.Spec)...)
	}
	return append(errs, validateSpec(&newIC.Spec)...)
}

func validateSpec(spec *v1alpha2.ImageCacheSpec) field.ErrorList {
	var errs field.ErrorList
	for _, rule := range specRules {
		errs = append(errs, rule(spec)...)
	}
	return errs
}

// MaxSpecBytes is the API's bound on a spec (see v1alpha2.MaxSpecBytes): a
// spec over it was admitted, ran, and then could never write its final
// status. The webhook refuses it as it is written; the controller declines
// it when the webhook is off.
const MaxSpecBytes = v1alpha2.MaxSpecBytes

func validateSize(spec *v1alpha2.ImageCacheSpec) field.ErrorList {
	raw, err := json.Marshal(spec)
	if err != nil {
		return field.ErrorList{field.Invalid(specPath, "", err.Error())}
	}
	if len(raw) <= MaxSpecBytes {
		return nil
	}
	images := 0
	for _, l := range spec.CacheSpec {
		images += len(l.Images)
	}
	return field.ErrorList{field.Invalid(specPath, fmt.Sprintf("%d images in %d lists", images, len(spec.CacheSpec)),
		fmt.Sprintf("the spec is %d KiB, over the limit of %d KiB: its status must fit in etcd beside it; split the images over several ImageCaches",
			len(raw)>>10, MaxSpecBytes>>10))}
}

func validateCacheSpec(spec *v1alpha2.ImageCacheSpec) field.ErrorList {
	if len(spec.CacheSpec) == 0 {
		return field.ErrorList{field.Invalid(cacheSpecPath, []v1alpha2.CacheSpecImages{},
			`list at least one entry, e.g. [{"images": ["nginx:1.27"]}]`)}
	}
	var errs field.ErrorList
	for i := range spec.CacheSpec {
		p := cacheSpecPath.Index(i)
		l := &spec.CacheSpec[i]
		followed := l.FromPods != nil || l.FromWorkloads != nil
		if !followed || len(l.Images) > 0 {
			errs = append(errs, validateImages(l.Images, p.Child("images"), !followed)...)
		}
		if l.FromPods != nil {
			errs = append(errs, validateSelectors(l.FromPods.NamespaceSelector, l.FromPods.PodSelector, p.Child("fromPods"))...)
		}
		if l.FromWorkloads != nil {
			errs = append(errs, validateSelectors(l.FromWorkloads.NamespaceSelector, l.FromWorkloads.PodSelector, p.Child("fromWorkloads"))...)
		}
		errs = append(errs, validateNodeSelector(l.NodeSelector, p.Child("nodeSelector"))...)
	}
	return errs
}

// validateSelectors checks the two selectors of a fromPods or a
// fromWorkloads as the API server checks a Deployment's: operators In,
// NotIn, Exists and DoesNotExist, valid keys and values, values only for In
// and NotIn.
func validateSelectors(namespaces, pods *metav1.LabelSelector, p *field.Path) field.ErrorList {
	opts := metav1validation.LabelSelectorValidationOptions{}
	var errs field.ErrorList
	for _, sel := range []struct {
		s    *metav1.LabelSelector
		name string
	}{{namespaces, "namespaceSelector"}, {pods, "podSelector"}} {
		for _, e := range metav1validation.ValidateLabelSelector(sel.s, opts, p.Child(sel.name)) {
			e.Detail += selectorHint
			errs = append(errs, e)
		}
	}
	return errs
}

// selectorHint is appended to every selector error.
const selectorHint = `; a label selector is {"matchLabels": {"app": "web"}} and/or ` +
	`{"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]}]}, operators In, NotIn, Exists, DoesNotExist`

// validateImages rejects invalid references and duplicates. Two entries are
// duplicates when they name the same content after normalisation (nginx and
// docker.io/library/nginx:latest), since both would pull the same image.
// A list without fromPods or fromWorkloads needs an image.
func validateImages(list []string, p *field.Path, required bool) field.ErrorList {
	if len(list) == 0 && required {
		return field.ErrorList{field.Invalid(p, []string{},
			`list at least one image, e.g. ["nginx:1.27"], or select pods whose images to cache with fromPods, or workloads with fromWorkloads`)}
	}
	var errs field.ErrorList
	type seen struct {
		index int
		ref   images.Ref
	}
	var valid []seen
	for i, s := range list {
		ref, err := images.Parse(s)
		if err != nil {
			errs = append(errs, field.Invalid(p.Index(i), s, referenceDetail(s, err)))
			continue
		}
		for _, prev := range valid {
			if prev.ref.Same(ref) {
				errs = append(errs, field.Invalid(p.Index(i), s, fmt.Sprintf(
					"names the same image as %s (%q), both %s: list each image once per list",
					p.Index(prev.index), list[prev.index], ref)))
				break
			}
		}
		valid = append(valid, seen{index: i, ref: ref})
	}
	return errs
}

// referenceDetail drops the parser's echo of the value, which field.Invalid
// already shows, and adds the accepted form.
func referenceDetail(s string, err error) string {
	msg := err.Error()
	if s == "" {
		return "an image reference must not be empty; " + imageSyntax
	}
	msg = strings.TrimPrefix(msg, fmt.Sprintf("%q is ", s))
	return msg + "; " + imageSyntax
}

func validateNodeSelector(sel map[string]string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, k := range sortedKeys(sel) {
		if msgs := content.IsLabelKey(k); len(msgs) > 0 {
			errs = append(errs, field.Invalid(p, k,
				"not a valid label key: "+strings.Join(msgs, "; ")+
					" (an optional DNS subdomain prefix and '/', e.g. kubernetes.io/arch or disktype)"))
		}
		if msgs := content.IsLabelValue(sel[k]); len(msgs) > 0 {
			errs = append(errs, field.Invalid(p.Key(k), sel[k],
				"not a valid label value: "+strings.Join(msgs, "; ")))
		}
	}
	return errs
}

func validatePullSecrets(spec *v1alpha2.ImageCacheSpec) field.ErrorList {
	var errs field.ErrorList
	for i, ref := range spec.ImagePullSecrets {
		p := pullSecretsPath.Index(i).Child("name")
		if ref.Name == "" {
			errs = append(errs, field.Invalid(p, ref.Name,
				"name a Secret of type kubernetes.io/dockerconfigjson in the ImageCache's namespace"))
			continue
		}
		if msgs := content.IsDNS1123Subdomain(ref.Name); len(msgs) > 0 {
			errs = append(errs, field.Invalid(p, ref.Name,
				"not a valid Secret name: "+strings.Join(msgs, "; ")))
		}
	}
	return errs
}

// validateListCountUnchanged keeps the original's rule: the controller matches
// an updated spec to what it cached list by list, by index, so adding or
// removing a list would misattribute every list after it.
func validateListCountUnchanged(oldSpec, newSpec *v1alpha2.ImageCacheSpec) field.ErrorList {
	if len(oldSpec.CacheSpec) == len(newSpec.CacheSpec) {
		return nil
	}
	return field.ErrorList{field.Invalid(cacheSpecPath, int64(len(newSpec.CacheSpec)), fmt.Sprintf(
		"the number of image lists cannot change (it was %d); only the images of each list and "+
			"spec.imagePullSecrets may change: to add or remove a list, create or delete an ImageCache",
		len(oldSpec.CacheSpec)))}
}

// validateNodeSelectorsUnchanged keeps the original's rule: moving a list to
// other nodes would leave its images on the old ones, since an update only
// deletes what a list lost, on the nodes it still selects.
func validateNodeSelectorsUnchanged(oldSpec, newSpec *v1alpha2.ImageCacheSpec) field.ErrorList {
	var errs field.ErrorList
	for i := range min(len(oldSpec.CacheSpec), len(newSpec.CacheSpec)) {
		o, n := oldSpec.CacheSpec[i].NodeSelector, newSpec.CacheSpec[i].NodeSelector
		if maps.Equal(o, n) {
			continue
		}
		errs = append(errs, field.Invalid(cacheSpecPath.Index(i).Child("nodeSelector"), selectorValue(n),
			fmt.Sprintf("a list's node selector cannot change (it was %s); only its images may change: "+
				"to cache on other nodes, purge this ImageCache and create another", selectorString(o))))
	}
	return errs
}

// specEqual treats nil and empty alike: a client that drops an empty list or
// map on a round trip has not changed anything.
func specEqual(a, b *v1alpha2.ImageCacheSpec) bool {
	if len(a.CacheSpec) != len(b.CacheSpec) || !equalSecrets(a.ImagePullSecrets, b.ImagePullSecrets) {
		return false
	}
	for i := range a.CacheSpec {
		if !equalStrings(a.CacheSpec[i].Images, b.CacheSpec[i].Images) ||
			!maps.Equal(a.CacheSpec[i].NodeSelector, b.CacheSpec[i].NodeSelector) ||
			!reflect.DeepEqual(a.CacheSpec[i].FromPods, b.CacheSpec[i].FromPods) ||
			!reflect.DeepEqual(a.CacheSpec[i].FromWorkloads, b.CacheSpec[i].FromWorkloads) ||
			!tolerationsEqual(a.CacheSpec[i].Tolerations, b.CacheSpec[i].Tolerations) {
			return false
		}
	}
	ca, cb := *a, *b
	ca.CacheSpec, cb.CacheSpec, ca.ImagePullSecrets, cb.ImagePullSecrets = nil, nil, nil, nil
	return reflect.DeepEqual(ca, cb)
}

func equalStrings(a, b []string) bool { return slices.Equal(a, b) }

func equalSecrets(a, b []corev1.LocalObjectReference) bool { return slices.Equal(a, b) }

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// selectorValue renders an absent selector as {} rather than null: "null"
// reads as an error in the message, {} reads as "all nodes".
func selectorValue(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func selectorString(m map[string]string) string {
	if len(m) == 0 {
		return "{} (all nodes)"
	}
	parts := make([]string, 0, len(m))
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%q:%q", k, m[k]))
	}
	return "{" + strings.Join(parts, ",") + "}"
}
