package imagecache

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
)

// A purge reaches the nodes that still hold the images: a cordoned node
// gets its delete Job (tolerating every taint, as the original's did); a
// node that is not Ready gets none, and keeps the image, so the purge
// reports it failed there rather than done; a Windows node never got our
// images and is only counted as skipped.
func TestPurge(t *testing.T) {
	const img = "nginx:1.25"
	g := NewWithT(t)
	h := newHarness(t, Config{Granularity: jobs.PerImage},
		node("ready"), node("cordoned", cordoned), node("down", notReady), node("win", windows), imageCache("c", img))
	h.succeed("c")
	g.Expect(h.status("c").Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	h.annotate("c", v1alpha2.PurgeAnnotation, "")
	h.events()

	h.settleDown("c")

	var onNodes []string
	for _, j := range h.jobs("c") {
		onNodes = append(onNodes, j.Annotations[jobs.AnnotationNode])
		g.Expect(j.Labels).To(HaveKeyWithValue(jobs.LabelKind, string(jobs.Delete)))
		g.Expect(j.Spec.Template.Spec.Tolerations).To(Equal([]corev1.Toleration{{Operator: corev1.TolerationOpExists}}))
	}
	g.Expect(onNodes).To(ConsistOf("ready", "cordoned"))
	g.Expect(h.job("c", img, "cordoned").Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.
		NodeSelectorTerms[0].MatchFields[0].Values).To(Equal([]string{"cordoned"}))
	h.complete("c", img, "ready")
	h.complete("c", img, "cordoned")
	h.settleDown("c")

	c := h.cache("c")
	st := c.Status
	g.Expect(outcomeOf(st)).To(Equal(outcome{v1alpha2.ImageCacheActionStatusFailed,
		v1alpha2.ImageCacheReasonImageCachePurge, v1alpha2.ImageCacheMessageImageDeleteFailedForSomeImages}))
	g.Expect(st.Failures).To(Equal(map[string]v1alpha2.NodeReasonMessageList{img: {{Node: "down", Reason: "NodeNotReady",
		Message: "node down is not Ready: no Job can delete nginx:1.25 from it, so it keeps the image; purge again once the node is Ready"}}}))
	g.Expect(st.SkippedNodes).To(Equal([]v1alpha2.SkippedNodes{{Reason: v1alpha2.SkipNotLinux, Count: 1, Nodes: []string{"win"}}}))
	g.Expect(*st.Counts).To(Equal(v1alpha2.Counts{Desired: 3, Succeeded: 2, Failed: 1, Skipped: 1}))
	g.Expect(st.ProcessedSpec).To(BeNil(), "nothing is left on the nodes for an update to diff against")
	g.Expect(c.Annotations).NotTo(HaveKey(v1alpha2.PurgeAnnotation))
	g.Expect(h.jobs("c")).To(BeEmpty(), "the delete policy removed the Jobs")
	g.Expect(h.events()).To(HaveExactElements(
		"Normal ImageCachePurge "+v1alpha2.ImageCacheMessagePurgingCache,
		"Warning ImageCachePurge "+v1alpha2.ImageCacheMessageImageDeleteFailedForSomeImages))
}

// A delete Job whose helper kept its image (a container on the node uses
// it, or it is pinned) is a success named in status.kept, not a failure;
// the Event says how many were kept. The next operation that deletes
// nothing, a refresh, drops the record.
func TestPurgeKept(t *testing.T) {
	const used, idle = "nginx:1.25", "redis:7"
	g := NewWithT(t)
	h := newHarness(t, Config{Granularity: jobs.PerImage}, node("n1"), imageCache("c", used, idle))
	h.succeed("c")
	h.annotate("c", v1alpha2.PurgeAnnotation, "")
	h.events()
	h.settleDown("c")

	why := "image nginx:1.25 (sha256:1) is used by 1 container(s) on this node that have not exited (shop/web-1/app): kept"
	j := h.job("c", used, "n1")
	h.containerStates(j, corev1.PodSucceeded, map[string]corev1.ContainerState{j.Spec.Template.Spec.Containers[0].Image: {
		Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", Message: jobs.KeptReport(v1alpha2.KeptReasonInUse, why)}}})
	h.complete("c", used, "n1")
	h.complete("c", idle, "n1")
	h.settleDown("c")

	st := h.status("c")
	g.Expect(outcomeOf(st)).To(Equal(outcome{v1alpha2.ImageCacheActionStatusSucceeded,
		v1alpha2.ImageCacheReasonImageCachePurge, v1alpha2.ImageCacheMessageImagesDeletedSuccessfully}))
	g.Expect(st.Failures).To(BeEmpty())
	g.Expect(st.Kept).To(Equal(map[string]v1alpha2.NodeReasonMessageList{used: {{Node: "n1", Reason: v1alpha2.KeptReasonInUse, Message: why}}}))
	g.Expect(st.Counts.Succeeded).To(Equal(int32(2)))
	g.Expect(h.events()).To(HaveExactElements(
		"Normal ImageCachePurge "+v1alpha2.ImageCacheMessagePurgingCache,
		"Normal ImageCachePurge "+v1alpha2.ImageCacheMessageImagesDeletedSuccessfully+"; 1 delete(s) kept the image, in use or pinned on the node (status.kept)"))

	h.annotate("c", v1alpha2.RefreshAnnotation, "")
	h.settleDown("c")
	h.completeAll("c")
	h.settleDown("c")
	g.Expect(h.status("c").Reason).To(Equal(v1alpha2.ImageCacheReasonImageCacheRefresh))
	g.Expect(h.status("c").Kept).To(BeNil())
}
