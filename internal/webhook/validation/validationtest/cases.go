// Package validationtest holds the ImageCaches the admission rules are
// tested with. The rules' unit tests and the webhook's tests through a real
// API server reject the same objects and expect the same words, so a
// message users read is pinned in one place, and a rule added here is proved
// at both levels. Only tests import it.
package validationtest

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
)

// Digest is a well-formed digest that names no real image.
const Digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// GoodCache is valid: two lists, the second with a node selector, and a
// pull secret, which the cases below break one way each.
func GoodCache(ns, name string) *v1alpha2.ImageCache {
	return &v1alpha2.ImageCache{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha2.ImageCacheSpec{
			CacheSpec: []v1alpha2.CacheSpecImages{
				{Images: []string{"nginx:1.27", "quay.io/org/app:v1"}},
				{Images: []string{"redis:7"}, NodeSelector: map[string]string{"kubernetes.io/arch": "arm64"}},
			},
			ImagePullSecrets: []corev1.LocalObjectReference{{Name: "regcred"}},
		},
	}
}

// Case turns GoodCache into an ImageCache the rules refuse.
type Case struct {
	Name   string
	Mutate func(*v1alpha2.ImageCache)
	// Want holds one substring per error, in the order they are reported.
	Want []string
}

// Rejected are the creates that pass the CRD's schema and that the
// admission rules refuse. Each Want is part of a field error as the rules
// return it, and so of the API server's denial.
func Rejected() []Case {
	images := func(list int, refs ...string) func(*v1alpha2.ImageCache) {
		return func(ic *v1alpha2.ImageCache) { ic.Spec.CacheSpec[list].Images = refs }
	}
	selector := func(list int, key, value string) func(*v1alpha2.ImageCache) {
		return func(ic *v1alpha2.ImageCache) { ic.Spec.CacheSpec[list].NodeSelector = map[string]string{key: value} }
	}
	fromPods := func(f v1alpha2.FromPods) func(*v1alpha2.ImageCache) {
		return func(ic *v1alpha2.ImageCache) { ic.Spec.CacheSpec[0].FromPods = &f }
	}
	podExpr := func(op metav1.LabelSelectorOperator) v1alpha2.FromPods {
		return v1alpha2.FromPods{PodSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: op, Values: []string{"web"}}}}}
	}
	fromWorkloads := func(f v1alpha2.FromWorkloads) func(*v1alpha2.ImageCache) {
		return func(ic *v1alpha2.ImageCache) { ic.Spec.CacheSpec[0].FromWorkloads = &f }
	}
	pullSecret := func(name string) func(*v1alpha2.ImageCache) {
		return func(ic *v1alpha2.ImageCache) { ic.Spec.ImagePullSecrets[0].Name = name }
	}
	return []Case{
		{Name: "upper case", Mutate: images(0, "NGINX"), Want: []string{
			`spec.cacheSpec[0].images[0]: Invalid value: "NGINX": not a valid image reference: invalid reference format: repository name (library/NGINX) must be lowercase; use [registry[:port]/]repository[:tag][@digest] in lower case, e.g. nginx:1.27, quay.io/org/app:v1 or app@sha256:<64 hex digits>`}},
		{Name: "empty tag", Mutate: images(0, "nginx:"), Want: []string{
			`spec.cacheSpec[0].images[0]: Invalid value: "nginx:": not a valid image reference: invalid reference format; use [registry[:port]/]repository`}},
		{Name: "scheme", Mutate: images(0, "https://nginx"), Want: []string{
			`spec.cacheSpec[0].images[0]: Invalid value: "https://nginx": not a valid image reference`}},
		{Name: "short digest", Mutate: images(0, "busybox@sha256:abc"), Want: []string{
			`spec.cacheSpec[0].images[0]: Invalid value: "busybox@sha256:abc": not a valid image reference`}},
		{Name: "space", Mutate: images(1, "redis:7 alpine"), Want: []string{
			`spec.cacheSpec[1].images[0]: Invalid value: "redis:7 alpine": not a valid image reference`}},
		{Name: "exact duplicate", Mutate: images(0, "nginx:1.27", "busybox", "nginx:1.27"), Want: []string{
			`spec.cacheSpec[0].images[2]: Invalid value: "nginx:1.27": names the same image as spec.cacheSpec[0].images[0] ("nginx:1.27"), both docker.io/library/nginx:1.27: list each image once per list`}},
		{Name: "duplicate after normalisation", Mutate: images(0, "nginx", "docker.io/library/nginx:latest"), Want: []string{
			`spec.cacheSpec[0].images[1]: Invalid value: "docker.io/library/nginx:latest": names the same image as spec.cacheSpec[0].images[0] ("nginx"), both docker.io/library/nginx:latest`}},
		{Name: "duplicate library path", Mutate: images(1, "redis:7", "library/redis:7"), Want: []string{
			`spec.cacheSpec[1].images[1]: Invalid value: "library/redis:7": names the same image as spec.cacheSpec[1].images[0] ("redis:7")`}},
		{Name: "duplicate by digest", Mutate: images(0, "busybox:1@"+Digest, "library/busybox@"+Digest), Want: []string{
			`spec.cacheSpec[0].images[1]: Invalid value: "library/busybox@` + Digest + `": names the same image as spec.cacheSpec[0].images[0]`}},
		{Name: "three copies give two errors", Mutate: images(1, "redis:7", "redis:7", "docker.io/redis:7"), Want: []string{
			`spec.cacheSpec[1].images[1]: Invalid value: "redis:7"`, `spec.cacheSpec[1].images[2]: Invalid value: "docker.io/redis:7"`}},
		{Name: "selector key with space", Mutate: selector(1, "disk type", "ssd"), Want: []string{
			`spec.cacheSpec[1].nodeSelector: Invalid value: "disk type": not a valid label key: name part must consist of alphanumeric characters, '-', '_' or '.'`}},
		{Name: "selector key with bad prefix", Mutate: selector(1, "-example.com/zone", "a"), Want: []string{
			`spec.cacheSpec[1].nodeSelector: Invalid value: "-example.com/zone": not a valid label key: prefix part a lowercase RFC 1123 subdomain`}},
		{Name: "selector value with space", Mutate: selector(0, "zone", "eu west"), Want: []string{
			`spec.cacheSpec[0].nodeSelector[zone]: Invalid value: "eu west": not a valid label value: a valid label must be an empty string or consist of alphanumeric characters`}},
		{Name: "selector value too long", Mutate: selector(1, "zone", strings.Repeat("z", 64)), Want: []string{
			`spec.cacheSpec[1].nodeSelector[zone]: Invalid value: "` + strings.Repeat("z", 64) + `": not a valid label value: must be no more than 63 bytes`}},
		{Name: "fromPods with a bad images entry still checks it", Mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec[0].FromPods = &v1alpha2.FromPods{}
			ic.Spec.CacheSpec[0].Images = []string{"NGINX"}
		}, Want: []string{`spec.cacheSpec[0].images[0]: Invalid value: "NGINX": not a valid image reference`}},
		{Name: "fromPods selector with an unknown operator", Mutate: fromPods(podExpr("Equals")), Want: []string{
			`spec.cacheSpec[0].fromPods.podSelector.matchExpressions[0].operator: Invalid value: "Equals": not a valid selector operator; a label selector is {"matchLabels"`}},
		{Name: "fromPods selector with a bad label key", Mutate: fromPods(v1alpha2.FromPods{NamespaceSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{"bad key": "x"}}}), Want: []string{
			`spec.cacheSpec[0].fromPods.namespaceSelector.matchLabels: Invalid value: "bad key": name part must consist of`}},
		{Name: "fromPods Exists with values", Mutate: fromPods(podExpr(metav1.LabelSelectorOpExists)), Want: []string{
			`spec.cacheSpec[0].fromPods.podSelector.matchExpressions[0].values: Forbidden: may not be specified when `}},
		{Name: "fromWorkloads with a bad images entry still checks it", Mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec[0].FromWorkloads = &v1alpha2.FromWorkloads{}
			ic.Spec.CacheSpec[0].Images = []string{"NGINX"}
		}, Want: []string{`spec.cacheSpec[0].images[0]: Invalid value: "NGINX": not a valid image reference`}},
		{Name: "fromWorkloads selector with an unknown operator", Mutate: fromWorkloads(v1alpha2.FromWorkloads{PodSelector: podExpr("Equals").PodSelector}), Want: []string{
			`spec.cacheSpec[0].fromWorkloads.podSelector.matchExpressions[0].operator: Invalid value: "Equals": not a valid selector operator; a label selector is {"matchLabels"`}},
		{Name: "fromWorkloads selector with a bad label key", Mutate: fromWorkloads(v1alpha2.FromWorkloads{NamespaceSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{"bad key": "x"}}}), Want: []string{
			`spec.cacheSpec[0].fromWorkloads.namespaceSelector.matchLabels: Invalid value: "bad key": name part must consist of`}},
		{Name: "fromWorkloads DoesNotExist with values", Mutate: fromWorkloads(v1alpha2.FromWorkloads{PodSelector: podExpr(metav1.LabelSelectorOpDoesNotExist).PodSelector}), Want: []string{
			`spec.cacheSpec[0].fromWorkloads.podSelector.matchExpressions[0].values: Forbidden: may not be specified when `}},
		{Name: "pull secret name upper case", Mutate: pullSecret("RegCred"), Want: []string{
			`spec.imagePullSecrets[0].name: Invalid value: "RegCred": not a valid Secret name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters`}},
		{Name: "pull secret name with underscore", Mutate: pullSecret("reg_cred"), Want: []string{
			`spec.imagePullSecrets[0].name: Invalid value: "reg_cred": not a valid Secret name`}},
		{Name: "empty pull secret name", Mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.ImagePullSecrets = append(ic.Spec.ImagePullSecrets, corev1.LocalObjectReference{})
		}, Want: []string{`spec.imagePullSecrets[1].name: Invalid value: "": name a Secret of type kubernetes.io/dockerconfigjson in the ImageCache's namespace`}},
	}
}
