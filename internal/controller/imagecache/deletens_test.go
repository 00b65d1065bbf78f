package imagecache

import (
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/jobwatch"
)

const controllerNS = "kube-fledged"

// Delete Jobs run in the controller's namespace, where a namespace
// enforcing Pod Security restricted cannot refuse them. No owner reference
// crosses namespaces, so each is mapped back to its cache by the annotation
// the Job watch keeps, settled, and deleted where it runs.
func TestDeleteJobsRunInControllerNamespace(t *testing.T) {
	const img = "nginx:1.25"
	g := NewWithT(t)
	h := newHarness(t, Config{Granularity: jobs.PerImage, Jobs: jobs.Options{DeleteNamespace: controllerNS, DeleteServiceAccountName: "kubefledged-delete"}},
		node("a"), node("b"), imageCache("c", img))
	h.succeed("c")
	for _, j := range h.jobs("c") {
		g.Expect(j.Namespace).To(Equal(testNS), "pull Jobs stay in the cache's namespace")
	}
	h.annotate("c", v1alpha2.PurgeAnnotation, "")
	h.settleDown("c")

	deletes := h.jobs("c")
	g.Expect(deletes).To(HaveLen(2))
	for _, j := range deletes {
		g.Expect(j.Namespace).To(Equal(controllerNS))
		g.Expect(j.OwnerReferences).To(BeEmpty())
		g.Expect(j.Spec.Template.Spec.ServiceAccountName).To(Equal("kubefledged-delete"))
		// What the Job watch keeps of it still names the cache.
		rec, err := jobwatch.Record(&j)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(h.r.cacheForJob(h.ctx, rec.(*jobwatch.Job))).To(HaveExactElements(
			HaveField("NamespacedName", types.NamespacedName{Namespace: testNS, Name: "c"})))
	}
	h.complete("c", img, "a")
	h.complete("c", img, "b")
	h.settleDown("c")

	g.Expect(h.status("c").Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	g.Expect(h.jobs("c")).To(BeEmpty(), "the delete policy removed them from the controller's namespace")
}

// Under the retain policy, delete Jobs kept in the controller's namespace
// are labelled with their result there, replaced pair by pair there, and
// deleted with their cache, which no owner reference does for them; the
// delete Jobs of a cache of the same name in another namespace stay.
func TestRetainedDeleteJobsGoWithTheirCache(t *testing.T) {
	const img = "nginx:1.25"
	g := NewWithT(t)
	cfg := Config{Granularity: jobs.PerImage, Retention: jobs.Retain, Jobs: jobs.Options{DeleteNamespace: controllerNS}}
	twin := imageCache("c", img)
	twin.Namespace, twin.UID = "elsewhere", "twin-uid"
	h := newHarness(t, cfg, node("a"), imageCache("c", img))
	other, err := jobs.Build(jobs.Owner{Cache: twin, Operation: "op-twin"}, jobs.Work{Kind: jobs.Delete, Image: img, Node: jobs.Node{Name: "a", Runtime: "containerd://2.0"}}, cfg.Jobs)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(h.api.Create(h.ctx, other)).To(Succeed())
	h.succeed("c")

	purge := func() string {
		h.annotate("c", v1alpha2.PurgeAnnotation, "")
		h.settleDown("c")
		j := h.job("c", img, "a")
		g.Expect(j.Namespace).To(Equal(controllerNS))
		h.complete("c", img, "a")
		h.settleDown("c")
		g.Expect(h.status("c").Reason).To(Equal(v1alpha2.ImageCacheReasonImageCachePurge))
		return j.Name
	}
	first := purge()
	kept := &batchv1.Job{}
	g.Expect(h.api.Get(h.ctx, client.ObjectKey{Namespace: controllerNS, Name: first}, kept)).To(Succeed())
	g.Expect(kept.Labels).To(HaveKeyWithValue(jobs.LabelResult, jobs.ResultSucceeded))

	second := purge()
	g.Expect(second).NotTo(Equal(first))
	g.Expect(h.api.Get(h.ctx, client.ObjectKey{Namespace: controllerNS, Name: first}, kept)).NotTo(Succeed(),
		"the purge's kept Job of the pair was replaced")

	g.Expect(h.api.Delete(h.ctx, h.cache("c"))).To(Succeed())
	_, err = h.step("c")
	g.Expect(err).NotTo(HaveOccurred())
	left := &batchv1.JobList{}
	g.Expect(h.api.List(h.ctx, left, client.InNamespace(controllerNS))).To(Succeed())
	g.Expect(left.Items).To(HaveExactElements(HaveField("Name", other.Name)), "only the other namespace's cache keeps its delete Job")
}
