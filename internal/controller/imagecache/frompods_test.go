package imagecache

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/podwatch"
)

// webPod is a pod of testNS made by ReplicaSet rs, labelled app=web.
func webPod(name, rs string, images ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, Labels: map[string]string{"app": "web"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs, UID: types.UID("uid-" + rs), Controller: ptr.To(true)}}}}
	for i, img := range images {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: fmt.Sprintf("c%d", i), Image: img})
	}
	return p
}

// followingCache caches redis:7 and the images of the app=web pods of its
// namespace.
func followingCache(name string) *v1alpha2.ImageCache {
	c := imageCache(name, "redis:7")
	c.Spec.CacheSpec[0].FromPods = &v1alpha2.FromPods{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
	return c
}

func (h *harness) addPod(p *corev1.Pod) {
	h.t.Helper()
	if err := h.api.Create(h.ctx, p); err != nil {
		h.t.Fatalf("adding pod %s: %v", p.Name, err)
	}
	if got := h.r.cachesForPods(h.ctx, p); len(got) == 0 {
		h.t.Fatalf("pod %s woke no cache", p.Name)
	}
}

func (h *harness) deletePod(name string) {
	h.t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name}}
	if err := h.api.Delete(h.ctx, p); err != nil {
		h.t.Fatalf("deleting pod %s: %v", name, err)
	}
}

// newJobs lists the (kind image node) of the cache's Jobs not seen before
// (the tests retain Jobs),
// sorted, and marks them seen.
func (h *harness) newJobs(cache string, seen map[string]bool) []string {
	var out []string
	for _, j := range h.jobs(cache) {
		if seen[j.Name] {
			continue
		}
		seen[j.Name] = true
		out = append(out, j.Labels[jobs.LabelKind]+" "+j.Annotations[jobs.AnnotationImage]+" "+j.Annotations[jobs.AnnotationNode])
	}
	sort.Strings(out)
	return out
}

func podImagesOf(st v1alpha2.ImageCacheStatus) []string {
	var out []string
	for _, l := range st.PodImages {
		out = append(out, fmt.Sprintf("list %d: %d pods, %d images", l.List, l.Pods, l.Count))
		for _, img := range l.Images {
			out = append(out, fmt.Sprintf("  %s %d %s", img.Image, img.Pods, img.UsedBy))
		}
	}
	return out
}

// TestFromPodsFollowsADeployment plays a Deployment's life on a cache that
// follows it: created, scaled, its image changed, deleted. Each image is
// pulled once when the first pod runs it, a scale pulls nothing, and an
// image no pod runs is dropped from the record without a delete Job.
func TestFromPodsFollowsADeployment(t *testing.T) {
	g := NewWithT(t)
	db := webPod("db-0", "db", "postgres:16")
	db.Labels = map[string]string{"app": "db"} // not selected
	h := newHarness(t, Config{Granularity: jobs.PerImage, Retention: jobs.Retain}, node("n1"), node("n2"), webPod("web-a-1", "web-a", "nginx:1.27"), db, followingCache("ic"))
	seen := map[string]bool{}

	// Created: the named image and the pods' one.
	h.succeed("ic")
	g.Expect(h.newJobs("ic", seen)).To(Equal([]string{"pull nginx:1.27 n1", "pull nginx:1.27 n2", "pull redis:7 n1", "pull redis:7 n2"}))
	st := h.status("ic")
	g.Expect(st.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	g.Expect(podImagesOf(st)).To(Equal([]string{"list 0: 1 pods, 1 images", "  nginx:1.27 1 apps/ReplicaSet/web-a"}))
	g.Expect(condition(st, v1alpha2.ConditionPodsResolved).Status).To(Equal(metav1.ConditionTrue))
	g.Expect(st.ProcessedSpec.CacheSpec[0].Images).To(Equal([]string{"redis:7"}), "the record of the spec keeps what was written")
	h.report("nginx:1.27", "redis:7")

	// Scaled to three: nothing to pull, the status counts them.
	h.addPod(webPod("web-a-2", "web-a", "nginx:1.27"))
	h.addPod(webPod("web-a-3", "web-a", "docker.io/library/nginx:1.27"))
	h.settleDown("ic")
	g.Expect(h.running("ic")).To(BeFalse())
	g.Expect(h.newJobs("ic", seen)).To(BeEmpty())
	g.Expect(podImagesOf(h.status("ic"))).To(Equal([]string{"list 0: 3 pods, 1 images", "  docker.io/library/nginx:1.27 3 apps/ReplicaSet/web-a"}))

	// Its image changed: the rollout's first new pod pulls the new image
	// at once, as an update; the old one stays while old pods run.
	h.events()
	h.addPod(webPod("web-b-1", "web-b", "nginx:1.28"))
	h.succeed("ic")
	g.Expect(h.newJobs("ic", seen)).To(Equal([]string{"pull nginx:1.28 n1", "pull nginx:1.28 n2"}))
	h.report("nginx:1.27", "nginx:1.28", "redis:7")
	st = h.status("ic")
	g.Expect(outcomeOf(st)).To(Equal(outcome{v1alpha2.ImageCacheActionStatusSucceeded, v1alpha2.ImageCacheReasonImageCacheUpdate,
		v1alpha2.ImageCacheMessageImagesPulledSuccessfully}))
	g.Expect(podImagesOf(st)).To(Equal([]string{"list 0: 4 pods, 2 images",
		"  docker.io/library/nginx:1.27 3 apps/ReplicaSet/web-a", "  nginx:1.28 1 apps/ReplicaSet/web-b"}))

	// The old pods go: nginx:1.27 is dropped, with no delete Job.
	for _, p := range []string{"web-a-1", "web-a-2", "web-a-3"} {
		h.deletePod(p)
	}
	h.settleDown("ic")
	g.Expect(h.newJobs("ic", seen)).To(BeEmpty())
	g.Expect(podImagesOf(h.status("ic"))).To(Equal([]string{"list 0: 1 pods, 1 images", "  nginx:1.28 1 apps/ReplicaSet/web-b"}))
	g.Expect(h.events()).To(ContainElement(And(ContainSubstring("Normal PodImagesDropped"), ContainSubstring("nginx:1.27"))))

	// Replaced at once (the Recreate strategy): the update pulls the new
	// image and drops the old one, deleting nothing.
	h.deletePod("web-b-1")
	h.addPod(webPod("web-c-1", "web-c", "nginx:1.29"))
	h.succeed("ic")
	g.Expect(h.newJobs("ic", seen)).To(Equal([]string{"pull nginx:1.29 n1", "pull nginx:1.29 n2"}))
	g.Expect(podImagesOf(h.status("ic"))).To(Equal([]string{"list 0: 1 pods, 1 images", "  nginx:1.29 1 apps/ReplicaSet/web-c"}))

	// A refresh pulls only what the cache holds now, once the kubelets
	// have collected the images.
	h.report()
	h.annotate("ic", v1alpha2.RefreshAnnotation, "")
	h.succeed("ic")
	g.Expect(h.newJobs("ic", seen)).To(Equal([]string{"pull nginx:1.29 n1", "pull nginx:1.29 n2", "pull redis:7 n1", "pull redis:7 n2"}))

	// A purge deletes what the cache holds, named and found alike.
	h.annotate("ic", v1alpha2.PurgeAnnotation, "")
	h.succeed("ic")
	g.Expect(h.newJobs("ic", seen)).To(Equal([]string{"delete nginx:1.29 n1", "delete nginx:1.29 n2", "delete redis:7 n1", "delete redis:7 n2"}))
	g.Expect(h.status("ic").PodImages).To(BeNil())

	// Purged, the cache follows nothing until it is refreshed or edited.
	h.addPod(webPod("web-d-1", "web-d", "nginx:1.30"))
	h.settleDown("ic")
	g.Expect(h.newJobs("ic", seen)).To(BeEmpty())
	g.Expect(h.status("ic").Reason).To(Equal(v1alpha2.ImageCacheReasonImageCachePurge))

	// Every pod gone after a refresh: only the named image stays.
	h.annotate("ic", v1alpha2.RefreshAnnotation, "")
	h.succeed("ic")
	g.Expect(h.newJobs("ic", seen)).To(Equal([]string{"pull nginx:1.29 n1", "pull nginx:1.29 n2", "pull nginx:1.30 n1", "pull nginx:1.30 n2",
		"pull redis:7 n1", "pull redis:7 n2"}))
	h.deletePod("web-c-1")
	h.deletePod("web-d-1")
	h.settleDown("ic")
	g.Expect(h.newJobs("ic", seen)).To(BeEmpty())
	g.Expect(podImagesOf(h.status("ic"))).To(Equal([]string{"list 0: 0 pods, 0 images"}))
}

// TestFromPodsUnreadable: pods the controller may not list leave the named
// images cached, say why in a condition and one Warning, and are followed
// once they can be read.
func TestFromPodsUnreadable(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, Config{Granularity: jobs.PerImage, Retention: jobs.Retain}, node("n1"), webPod("web-1", "web-a", "nginx:1.27"), followingCache("ic"))
	h.pods.err = fmt.Errorf("listing pods: %w", apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "",
		fmt.Errorf(`User "system:serviceaccount:kube-fledged:kubefledged" cannot list resource "pods" in API group "" at the cluster scope`)))
	seen := map[string]bool{}

	h.succeed("ic")
	g.Expect(h.newJobs("ic", seen)).To(Equal([]string{"pull redis:7 n1"}))
	h.report("redis:7")
	st := h.status("ic")
	g.Expect(st.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded), "the named images are cached regardless")
	cond := condition(st, v1alpha2.ConditionPodsResolved)
	g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(cond.Reason).To(Equal("PodsUnreadable"))
	g.Expect(cond.Message).To(ContainSubstring(`cannot list resource "pods"`))
	warnings := 0
	for _, e := range h.events() {
		if strings.HasPrefix(e, "Warning PodsUnreadable") {
			warnings++
		}
	}
	g.Expect(warnings).To(Equal(1))
	res := h.settleDown("ic")
	g.Expect(res.RequeueAfter).To(BeNumerically(">", 0), "looked at again without an event")

	// Readable again: the pods' image is pulled.
	h.pods.err = nil
	h.succeed("ic")
	g.Expect(h.newJobs("ic", seen)).To(Equal([]string{"pull nginx:1.27 n1"}))
	g.Expect(condition(h.status("ic"), v1alpha2.ConditionPodsResolved).Status).To(Equal(metav1.ConditionTrue))

	// Unreadable once more: what was found stays cached, not dropped, and
	// one Warning says why.
	h.events()
	h.pods.err = fmt.Errorf("listing pods: %w", apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", fmt.Errorf("revoked")))
	h.settleDown("ic")
	st = h.status("ic")
	g.Expect(podImagesOf(st)).To(Equal([]string{"list 0: 1 pods, 1 images", "  nginx:1.27 1 apps/ReplicaSet/web-a"}))
	g.Expect(condition(st, v1alpha2.ConditionPodsResolved).Reason).To(Equal("PodsUnreadable"))
	g.Expect(h.events()).To(HaveExactElements(HavePrefix("Warning PodsUnreadable the controller cannot read the pods fromPods selects")))

	// Still being listed (a restart): no status write, a look again soon.
	h.pods.err = podwatch.ErrNotSynced
	writes := len(h.writes())
	res, err := h.step("ic")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RequeueAfter).To(BeNumerically(">", 0))
	g.Expect(h.writes()).To(HaveLen(writes))
}

// TestFromPodsWaitsForTheFirstList: a new cache waits while the pods are
// first listed, so that its create pulls them with the named images.
func TestFromPodsWaitsForTheFirstList(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, Config{Granularity: jobs.PerImage, Retention: jobs.Retain}, node("n1"), webPod("web-1", "web-a", "nginx:1.27"), followingCache("ic"))
	h.pods.err = podwatch.ErrNotSynced
	res, err := h.step("ic")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RequeueAfter).To(BeNumerically(">", 0))
	g.Expect(h.writes()).To(BeEmpty())
	h.pods.err = nil
	seen := map[string]bool{}
	h.succeed("ic")
	g.Expect(h.newJobs("ic", seen)).To(Equal([]string{"pull nginx:1.27 n1", "pull redis:7 n1"}))
}

// TestFromPodsOfOtherNamespaces: a namespaceSelector reaches pods beyond
// the cache's namespace, and a namespace relabelled in or out of it
// changes what is cached.
func TestFromPodsOfOtherNamespaces(t *testing.T) {
	g := NewWithT(t)
	shop := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"team": "web"}}}
	blog := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "blog"}}
	p1 := webPod("web-1", "web-a", "nginx:1.27")
	p1.Namespace = "shop"
	p2 := webPod("cms", "cms", "wordpress@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
	p2.Namespace = "blog"
	c := imageCache("ic")
	c.Spec.CacheSpec[0].Images = nil
	c.Spec.CacheSpec[0].FromPods = &v1alpha2.FromPods{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "web"}}}
	h := newHarness(t, Config{Granularity: jobs.PerImage, Retention: jobs.Retain}, node("n1"), shop, blog, p1, p2, c)
	seen := map[string]bool{}

	h.succeed("ic")
	g.Expect(h.newJobs("ic", seen)).To(Equal([]string{"pull nginx:1.27 n1"}))
	h.report("nginx:1.27")
	g.Expect(h.r.cachesForPods(h.ctx, blog)).To(HaveLen(1), "a namespace event wakes a cache with a namespaceSelector")

	blog.Labels = map[string]string{"team": "web"}
	g.Expect(h.api.Update(h.ctx, blog)).To(Succeed())
	h.succeed("ic")
	g.Expect(h.newJobs("ic", seen)).To(Equal([]string{"pull wordpress@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef n1"}))
	g.Expect(podImagesOf(h.status("ic"))).To(Equal([]string{"list 0: 2 pods, 2 images",
		"  nginx:1.27 1 shop/ReplicaSet/web-a",
		"  wordpress@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef 1 blog/ReplicaSet/cms"}))
}

// TestFromPodsOnNewNodes: a node that joins gets the images the cache holds
// for its pods with the named ones, in its own new-node operation, and the
// record of the pods is left as it was.
func TestFromPodsOnNewNodes(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, Config{Granularity: jobs.PerImage, Retention: jobs.Retain}, node("n1"), webPod("web-1", "web-a", "nginx:1.27"), followingCache("ic"))
	seen := map[string]bool{}
	h.succeed("ic")
	g.Expect(h.newJobs("ic", seen)).To(Equal([]string{"pull nginx:1.27 n1", "pull redis:7 n1"}))
	before := h.status("ic").PodImages

	h.addNode(node("n2", h.joinedNow))
	h.succeed("ic")
	g.Expect(h.newJobs("ic", seen)).To(Equal([]string{"pull nginx:1.27 n2", "pull redis:7 n2"}))
	st := h.status("ic")
	g.Expect(st.Reason).To(Equal(v1alpha2.ImageCacheReasonImageCacheNewNodes))
	g.Expect(st.Counts.Desired).To(BeEquivalentTo(4), "the status counts the pod images on every node")
	g.Expect(st.PodImages).To(Equal(before))
}
