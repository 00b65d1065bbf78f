package podimages

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
)

const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// pod is a pod of ns, made by a ReplicaSet named owner ("" for a bare
// pod), running images in its containers.
func pod(ns, name, owner string, lbls map[string]string, images ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls}}
	if owner != "" {
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: owner, Controller: ptr.To(true)}}
	}
	for i, img := range images {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: fmt.Sprintf("c%d", i), Image: img})
	}
	return p
}

func withInit(img string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "init", Image: img})
	}
}

func withDebug(img string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers,
			corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: img}})
	}
}

func with(p *corev1.Pod, opts ...func(*corev1.Pod)) *corev1.Pod {
	for _, o := range opts {
		o(p)
	}
	return p
}

var namespaces = map[string]labels.Set{
	"shop":  {"team": "web", corev1.LabelMetadataName: "shop"},
	"blog":  {"team": "web", corev1.LabelMetadataName: "blog"},
	"batch": {"team": "data", corev1.LabelMetadataName: "batch"},
}

func sel(kv ...string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

// found renders a record as "list: image pods usedBy" lines, with the
// list's counts first.
func found(rec []v1alpha2.ListPodImages) []string {
	var out []string
	for _, l := range rec {
		out = append(out, fmt.Sprintf("list %d: %d pods, %d images, %d omitted", l.List, l.Pods, l.Count, l.Omitted))
		for _, img := range l.Images {
			out = append(out, fmt.Sprintf("  %s %d %s", img.Image, img.Pods, img.UsedBy))
		}
	}
	return out
}

func TestResolve(t *testing.T) {
	web := map[string]string{"app": "web"}
	pods := []*corev1.Pod{
		pod("shop", "web-1", "web-5d8f", web, "nginx:1.27", "envoy:1.30"),
		pod("shop", "web-2", "web-5d8f", web, "nginx:1.27", "envoy:1.30"),
		with(pod("shop", "web-3", "web-77aa", web, "docker.io/library/nginx:1.27"), withInit("busybox:1.36")),
		with(pod("blog", "cms", "", map[string]string{"app": "cms"}, "wordpress@"+digest), withDebug("busybox:1.37")),
		pod("batch", "etl", "", map[string]string{"app": "etl"}, "spark:3"),
		pod("nowhere", "lost", "", web, "orphan:1"), // its namespace is not known yet
		pod("shop", "pull-job", "", map[string]string{jobs.LabelManager: jobs.LabelManagerValue, "app": "web"}, "nginx:1.28"),
	}
	cases := []struct {
		name  string
		lists []v1alpha2.CacheSpecImages
		want  []string
		bad   string
	}{
		{name: "no namespaceSelector: the cache's own namespace, every pod",
			lists: []v1alpha2.CacheSpecImages{{FromPods: &v1alpha2.FromPods{}}},
			want: []string{"list 0: 3 pods, 3 images, 0 omitted",
				"  busybox:1.36 1 shop/ReplicaSet/web-77aa",
				"  envoy:1.30 2 shop/ReplicaSet/web-5d8f",
				"  docker.io/library/nginx:1.27 3 shop/ReplicaSet/web-5d8f"}},
		{name: "an empty namespaceSelector is every namespace, ephemeral containers and digests included",
			lists: []v1alpha2.CacheSpecImages{{FromPods: &v1alpha2.FromPods{NamespaceSelector: &metav1.LabelSelector{}}}},
			want: []string{"list 0: 5 pods, 6 images, 0 omitted",
				"  busybox:1.36 1 shop/ReplicaSet/web-77aa",
				"  busybox:1.37 1 blog/Pod/cms",
				"  envoy:1.30 2 shop/ReplicaSet/web-5d8f",
				"  docker.io/library/nginx:1.27 3 shop/ReplicaSet/web-5d8f",
				"  spark:3 1 batch/Pod/etl",
				"  wordpress@" + digest + " 1 blog/Pod/cms"}},
		{name: "both selectors",
			lists: []v1alpha2.CacheSpecImages{{FromPods: &v1alpha2.FromPods{NamespaceSelector: sel("team", "web"), PodSelector: sel("app", "cms")}}},
			want:  []string{"list 0: 1 pods, 2 images, 0 omitted", "  busybox:1.37 1 blog/Pod/cms", "  wordpress@" + digest + " 1 blog/Pod/cms"}},
		{name: "matchExpressions",
			lists: []v1alpha2.CacheSpecImages{{FromPods: &v1alpha2.FromPods{NamespaceSelector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"web"}}}}}}},
			want: []string{"list 0: 1 pods, 1 images, 0 omitted", "  spark:3 1 batch/Pod/etl"}},
		{name: "images the list names are not counted again",
			lists: []v1alpha2.CacheSpecImages{{Images: []string{"nginx:1.27"}, FromPods: &v1alpha2.FromPods{PodSelector: sel("app", "web")}}},
			want: []string{"list 0: 3 pods, 2 images, 0 omitted",
				"  busybox:1.36 1 shop/ReplicaSet/web-77aa", "  envoy:1.30 2 shop/ReplicaSet/web-5d8f"}},
		{name: "lists without fromPods have no record; each list its own",
			lists: []v1alpha2.CacheSpecImages{{Images: []string{"redis:7"}},
				{FromPods: &v1alpha2.FromPods{NamespaceSelector: sel("team", "data")}}},
			want: []string{"list 1: 1 pods, 1 images, 0 omitted", "  spark:3 1 batch/Pod/etl"}},
		{name: "a selector matching nothing",
			lists: []v1alpha2.CacheSpecImages{{FromPods: &v1alpha2.FromPods{PodSelector: sel("app", "none")}}},
			want:  []string{"list 0: 0 pods, 0 images, 0 omitted"}},
		{name: "a bad selector is reported, other lists resolve",
			lists: []v1alpha2.CacheSpecImages{
				{FromPods: &v1alpha2.FromPods{PodSelector: &metav1.LabelSelector{
					MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Equals"}}}}},
				{FromPods: &v1alpha2.FromPods{NamespaceSelector: sel("team", "data")}}},
			want: []string{"list 1: 1 pods, 1 images, 0 omitted", "  spark:3 1 batch/Pod/etl"},
			bad:  `podSelector: "Equals" is not a valid label selector operator`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			rec, bad := Resolve("shop", tc.lists, pods, nil, namespaces)
			g.Expect(found(rec)).To(Equal(tc.want))
			if tc.bad == "" {
				g.Expect(bad).To(BeEmpty())
			} else {
				g.Expect(bad).To(HaveLen(1))
				g.Expect(bad[0]).To(MatchError(ContainSubstring(tc.bad)))
			}
		})
	}
}

// TestResolveBounded: a cache follows at most MaxPodImages images, filled
// in list order, and counts the rest.
func TestResolveBounded(t *testing.T) {
	g := NewWithT(t)
	var pods []*corev1.Pod
	for i := range v1alpha2.MaxPodImages + 10 {
		pods = append(pods, pod("shop", fmt.Sprintf("p%03d", i), "", nil, fmt.Sprintf("app-%03d:v1", i)))
	}
	lists := []v1alpha2.CacheSpecImages{{FromPods: &v1alpha2.FromPods{}}, {FromPods: &v1alpha2.FromPods{}}}
	rec, bad := Resolve("shop", lists, pods, nil, namespaces)
	g.Expect(bad).To(BeEmpty())
	g.Expect(rec).To(HaveLen(2))
	g.Expect(rec[0].Count).To(BeEquivalentTo(v1alpha2.MaxPodImages + 10))
	g.Expect(rec[0].Images).To(HaveLen(v1alpha2.MaxPodImages))
	g.Expect(rec[0].Omitted).To(BeEquivalentTo(10))
	g.Expect(rec[1].Images).To(BeEmpty())
	g.Expect(rec[1].Omitted).To(BeEquivalentTo(v1alpha2.MaxPodImages + 10))
}

func record(list int32, images ...string) v1alpha2.ListPodImages {
	r := v1alpha2.ListPodImages{List: list, Count: int32(len(images))}
	for _, img := range images {
		r.Images = append(r.Images, v1alpha2.PodImage{Image: img, Pods: 1})
	}
	return r
}

func TestEffectivePriorGained(t *testing.T) {
	spec := v1alpha2.ImageCacheSpec{CacheSpec: []v1alpha2.CacheSpecImages{
		{Images: []string{"redis:7"}, FromPods: &v1alpha2.FromPods{}},
		{Images: []string{"etcd:3"}},
	}}
	was := []v1alpha2.ListPodImages{record(0, "nginx:1.27", "envoy:1.30")}
	cases := []struct {
		name      string
		now       []v1alpha2.ListPodImages
		effective [][]string
		prior     [][]string
		gained    bool
	}{
		{name: "unchanged", now: was,
			effective: [][]string{{"redis:7", "nginx:1.27", "envoy:1.30"}, {"etcd:3"}},
			prior:     [][]string{{"redis:7", "nginx:1.27", "envoy:1.30"}, {"etcd:3"}}},
		{name: "an image changed: the new one is gained, the old one dropped from the prior, so not deleted",
			now:       []v1alpha2.ListPodImages{record(0, "nginx:1.28", "envoy:1.30")},
			effective: [][]string{{"redis:7", "nginx:1.28", "envoy:1.30"}, {"etcd:3"}},
			prior:     [][]string{{"redis:7", "envoy:1.30"}, {"etcd:3"}}, gained: true},
		{name: "the same image spelt otherwise is no gain",
			now:       []v1alpha2.ListPodImages{record(0, "docker.io/library/nginx:1.27", "envoy:1.30")},
			effective: [][]string{{"redis:7", "docker.io/library/nginx:1.27", "envoy:1.30"}, {"etcd:3"}},
			prior:     [][]string{{"redis:7", "nginx:1.27", "envoy:1.30"}, {"etcd:3"}}},
		{name: "every pod gone",
			now:       []v1alpha2.ListPodImages{record(0)},
			effective: [][]string{{"redis:7"}, {"etcd:3"}},
			prior:     [][]string{{"redis:7"}, {"etcd:3"}}},
	}
	images := func(s *v1alpha2.ImageCacheSpec) [][]string {
		var out [][]string
		for _, l := range s.CacheSpec {
			out = append(out, l.Images)
		}
		return out
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			eff := Effective(spec, tc.now)
			g.Expect(images(&eff)).To(Equal(tc.effective))
			g.Expect(images(Prior(&spec, was, tc.now))).To(Equal(tc.prior))
			g.Expect(Gained(was, tc.now)).To(Equal(tc.gained))
			g.Expect(spec.CacheSpec[0].Images).To(Equal([]string{"redis:7"}), "the spec is not written to")
		})
	}
	g := NewWithT(t)
	g.Expect(Prior(nil, was, was)).To(BeNil(), "nothing processed: an update pulls everything")
	g.Expect(Gained(nil, was)).To(BeTrue())
}

func TestGrow(t *testing.T) {
	was := []v1alpha2.ListPodImages{record(0, "envoy:1.30", "nginx:1.27"), record(2, "etcd:3")}
	cases := []struct {
		name string
		now  []v1alpha2.ListPodImages
		want []string
	}{
		{name: "nothing changed", now: was,
			want: []string{"list 0: 0 pods, 2 images, 0 omitted", "  envoy:1.30 1 ", "  nginx:1.27 1 ", "list 2: 0 pods, 1 images, 0 omitted", "  etcd:3 1 "}},
		{name: "an image gained is taken in, in the order Resolve keeps",
			now:  []v1alpha2.ListPodImages{record(0, "envoy:1.30", "mysql:8", "nginx:1.27"), record(2, "etcd:3")},
			want: []string{"list 0: 0 pods, 3 images, 0 omitted", "  envoy:1.30 1 ", "  mysql:8 1 ", "  nginx:1.27 1 ", "list 2: 0 pods, 1 images, 0 omitted", "  etcd:3 1 "}},
		{name: "an image changed: the new one comes in, the old one stays until the operation ends",
			now:  []v1alpha2.ListPodImages{record(0, "envoy:1.30", "nginx:1.28"), record(2, "etcd:3")},
			want: []string{"list 0: 0 pods, 3 images, 0 omitted", "  envoy:1.30 1 ", "  nginx:1.27 1 ", "  nginx:1.28 1 ", "list 2: 0 pods, 1 images, 0 omitted", "  etcd:3 1 "}},
		{name: "every pod gone: the images stay",
			now:  []v1alpha2.ListPodImages{record(0), record(2)},
			want: []string{"list 0: 0 pods, 2 images, 0 omitted", "  envoy:1.30 1 ", "  nginx:1.27 1 ", "list 2: 0 pods, 1 images, 0 omitted", "  etcd:3 1 "}},
		{name: "the same image spelt otherwise is kept once, as now spells it",
			now:  []v1alpha2.ListPodImages{record(0, "docker.io/library/nginx:1.27", "envoy:1.30"), record(2, "etcd:3")},
			want: []string{"list 0: 0 pods, 2 images, 0 omitted", "  envoy:1.30 1 ", "  docker.io/library/nginx:1.27 1 ", "list 2: 0 pods, 1 images, 0 omitted", "  etcd:3 1 "}},
		{name: "lists are matched by index, not by order",
			now:  []v1alpha2.ListPodImages{record(2, "etcd:3.5"), record(0, "envoy:1.30", "nginx:1.27")},
			want: []string{"list 2: 0 pods, 2 images, 0 omitted", "  etcd:3 1 ", "  etcd:3.5 1 ", "list 0: 0 pods, 2 images, 0 omitted", "  envoy:1.30 1 ", "  nginx:1.27 1 "}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			before := found(tc.now)
			g.Expect(found(Grow(was, tc.now))).To(Equal(tc.want))
			g.Expect(found(tc.now)).To(Equal(before), "now is not written to")
			g.Expect(Gained(Grow(was, tc.now), tc.now)).To(BeFalse(), "what is grown holds all now holds")
		})
	}
	g := NewWithT(t)
	g.Expect(Grow(was, nil)).To(BeEmpty())
}
