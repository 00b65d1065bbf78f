package realnode_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/commands"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/test/framework"
)

// TestRealNode runs every operation on the real node with one controller that retains its
// Jobs, so that the pods can be inspected afterwards, once with each pull Job granularity. The
// operations run in parallel (each on images of its own); the restart comes last because it
// deletes every retained Job.
func TestRealNode(t *testing.T) {
	framework.NeedRealNode(t)
	for i, gr := range []jobs.Granularity{jobs.PerNode, jobs.PerImage} {
		tag = tags[i]
		t.Run(gr.String(), func(t *testing.T) {
			stop := runController(t, jobs.Retain, gr)
			var missingNS string
			t.Run("operations", func(t *testing.T) {
				t.Run("PullSucceeds", func(t *testing.T) { testPullSucceeds(t, gr) })
				t.Run("MissingImageFails", func(t *testing.T) { missingNS = testMissingImageFails(t, gr) })
				t.Run("RateLimitedPullHeals", testRateLimitedPullHeals)
				t.Run("UpdatePullsOnlyTheAddedImage", testUpdatePullsOnlyTheAddedImage)
				t.Run("PurgeRemovesFromTheRuntime", testPurgeRemovesFromTheRuntime)
			})
			t.Run("RestartRemovesRetainedJobs", func(t *testing.T) {
				if missingNS == "" {
					t.Skip("MissingImageFails left no retained Job to remove")
				}
				testRestartRemovesRetainedJobs(t, stop, missingNS, gr)
			})
		})
	}
}

// testPullSucceeds: every container of the pull Jobs really runs on the node (our helper
// image's copy-self, then our binary inside each target image) and the images land in
// containerd, the multi-layer one included.
func testPullSucceeds(t *testing.T, gr jobs.Granularity) {
	t.Parallel()
	g := NewWithT(t)
	ns := framework.Namespace(t, k8s, "realnode-")
	key := client.ObjectKey{Namespace: ns, Name: "pull"}
	images := imageRefs("small-a", multiLayer)
	t0 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), framework.CacheOnNode(ns, "pull", node.Name(), images...))).To(Succeed())
	c := framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded), "failures: %v", c.Status.Failures)
	t.Logf("create of %d images took %s", len(images), c.Status.CompletionTime.Sub(c.Status.StartTime.Time))
	for _, ref := range append(images, helperImage) {
		g.Expect(inRuntime(g, ref)).To(BeTrue(), "%s is not in containerd", ref)
	}

	js := jobsOf(g, ns, client.MatchingLabels{jobs.LabelImageCache: "pull"})
	if gr == jobs.PerNode {
		g.Expect(js).To(HaveLen(1), "one Job for the real node, none for the kwok one")
	} else {
		g.Expect(js).To(HaveLen(len(images)), "one Job per image, on the real node only")
	}
	var all []string
	for _, j := range js {
		g.Expect(j.Annotations[jobs.AnnotationNode]).To(Equal(node.Name()))
		g.Expect(j.Labels[jobs.LabelResult]).To(Equal(jobs.ResultSucceeded))
		pods := podsOf(g, ns, j.Name)
		g.Expect(pods).To(HaveLen(1))
		p := pods[0]
		g.Expect(p.Spec.NodeName).To(Equal(node.Name()))
		g.Expect(p.Status.InitContainerStatuses).To(HaveLen(1))
		g.Expect(p.Status.ContainerStatuses).To(HaveLen(len(jobs.ImagesOf(&j))))
		for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			g.Expect(cs.State.Terminated).NotTo(BeNil(), "container %s did not run", cs.Name)
			g.Expect(cs.State.Terminated.ExitCode).To(BeZero(), "container %s: %+v", cs.Name, cs.State.Terminated)
			g.Expect(cs.ImageID).NotTo(BeEmpty())
		}
		for _, cs := range p.Status.ContainerStatuses {
			all = append(all, cs.Image)
		}
		t.Logf("pull Job of %v ran %s; kubelet: %s", jobs.ImagesOf(&j), took(j), pulled(g, ns, p.Name))
	}
	g.Expect(all).To(ConsistOf(images))
}

// pulled is what the kubelet's Pulled events of a pod say, for the figures in the log.
func pulled(g Gomega, ns, pod string) []string {
	l := &corev1.EventList{}
	g.Expect(k8s.List(context.Background(), l, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, e := range l.Items {
		if e.InvolvedObject.Name == pod && e.Reason == "Pulled" {
			out = append(out, e.Message)
		}
	}
	return out
}

// testMissingImageFails: the registry's 404 reaches the cache's failures in the runtime's
// own words, the good images beside it are pulled, and the retained pod shows each
// container's state: the missing image's really in ImagePullBackOff, with the kubelet's
// events. The missing image is settled as soon as the kubelet reports it, from a node Job's
// container or a Job per (image, node)'s pod, not at the deadline. It returns the namespace
// of the retained Jobs for the restart test.
func testMissingImageFails(t *testing.T, gr jobs.Granularity) string {
	t.Parallel()
	g := NewWithT(t)
	ns := framework.Namespace(t, k8s, "realnode-")
	key := client.ObjectKey{Namespace: ns, Name: "missing"}
	good, good2, bad := ref("small-b"), ref("small-g"), ref(missing)
	t0 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), framework.CacheOnNode(ns, "missing", node.Name(), good, bad, good2))).To(Succeed())
	c := framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusFailed))
	g.Expect(c.Status.Message).To(Equal(v1alpha2.ImageCacheMessageImagePullFailedForSomeImages))
	g.Expect(c.Status.Failures).To(HaveLen(1))
	g.Expect(c.Status.Failures[bad]).To(HaveLen(1))
	g.Expect(c.Status.Counts.Succeeded).To(Equal(int32(2)))
	f := c.Status.Failures[bad][0]
	g.Expect(f.Node).To(Equal(node.Name()))
	g.Expect(f.Reason).To(BeElementOf("ImagePullBackOff", "ErrImagePull"))
	g.Expect(f.Message).To(ContainSubstring(bad))
	g.Expect(f.Message).To(ContainSubstring("not found"), "containerd's message for a 404")
	g.Expect(strings.Count(f.Message, "failed to pull and unpack image")).To(Equal(1), "containerd's message once, though the kubelet's events repeat it")
	g.Expect(f.Message).NotTo(ContainSubstring("Error: ErrImagePull"), "the kubelet's bare state events add nothing")
	ran := c.Status.CompletionTime.Sub(c.Status.StartTime.Time)
	t.Logf("failure after %s: %s: %s", ran, f.Reason, f.Message)
	if gr == jobs.PerNode {
		g.Expect(ran).To(BeNumerically("<", deadline), "settled from the container, not at the deadline")
	}
	g.Expect(inRuntime(g, good)).To(BeTrue())
	g.Expect(inRuntime(g, good2)).To(BeTrue())
	g.Expect(inRuntime(g, bad)).To(BeFalse())

	// Labelled failed, not expired: settled from the pod before the deadline, at either
	// granularity (the operation's own length, on a loaded machine, says less).
	kept := jobsOf(g, ns, client.MatchingLabels{jobs.LabelImageCache: "missing", jobs.LabelResult: jobs.ResultFailed})
	g.Expect(kept).To(HaveLen(1))
	pods := podsOf(g, ns, kept[0].Name)
	g.Expect(pods).To(HaveLen(1))
	pod := pods[0].Name
	// The node's Job shows all three containers; a Job per pair, the missing image's.
	want := map[string]string{bad: "ImagePullBackOff"}
	if gr == jobs.PerNode {
		want[good], want[good2] = "exit 0", "exit 0"
	}
	// Between retries the kubelet shows ErrImagePull again for a moment.
	g.Eventually(func(g Gomega) map[string]string {
		p := &corev1.Pod{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: pod}, p)).To(Succeed())
		states := map[string]string{}
		for _, cs := range p.Status.ContainerStatuses {
			switch {
			case cs.State.Terminated != nil:
				states[cs.Image] = fmt.Sprintf("exit %d", cs.State.Terminated.ExitCode)
			case cs.State.Waiting != nil:
				states[cs.Image] = cs.State.Waiting.Reason
			}
		}
		return states
	}).WithTimeout(framework.ClusterTimeout).WithPolling(250 * time.Millisecond).Should(Equal(want))
	g.Eventually(func(g Gomega) []string {
		l := &corev1.EventList{}
		g.Expect(k8s.List(context.Background(), l, client.InNamespace(ns))).To(Succeed())
		var got []string
		for _, e := range l.Items {
			if e.InvolvedObject.Kind == "Pod" && e.InvolvedObject.Name == pod {
				got = append(got, e.Type+" "+e.Reason+" "+e.Message)
			}
		}
		return got
	}).WithTimeout(framework.ClusterTimeout).Should(And(
		ContainElement(And(HavePrefix("Warning Failed "), ContainSubstring(bad), ContainSubstring("not found"))),
		ContainElement(HavePrefix("Normal BackOff Back-off pulling image")),
	))
	return ns
}

// testRateLimitedPullHeals: a registry that answers 429 Too Many Requests for a few seconds
// and then serves the image fails the kubelet's first attempt; its next attempt, after the
// back-off, pulls, and the cache ends Succeeded with the image in containerd, at either
// granularity. Failing the first ErrImagePull, as node Jobs did, would end it Failed.
func testRateLimitedPullHeals(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := framework.Namespace(t, k8s, "realnode-")
	key := client.ObjectKey{Namespace: ns, Name: "busy"}
	busy := ref("small-h")
	served, err := node.FailManifest(busy, http.StatusTooManyRequests, 3*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	t0 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), framework.CacheOnNode(ns, "busy", node.Name(), busy))).To(Succeed())
	c := framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	g.Expect(served()).To(BeNumerically(">", 0), "the registry never answered 429: nothing was shown")
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded), "failures: %v", c.Status.Failures)
	g.Expect(inRuntime(g, busy)).To(BeTrue())
	t.Logf("pulled after %d answers 429, in %s", served(), c.Status.CompletionTime.Sub(c.Status.StartTime.Time))
}

// testUpdatePullsOnlyTheAddedImage: an update runs one Job, for the image the list gained.
func testUpdatePullsOnlyTheAddedImage(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := framework.Namespace(t, k8s, "realnode-")
	rec := framework.RecordJobs(t, kube, ns, nil)
	key := client.ObjectKey{Namespace: ns, Name: "update"}
	first, added := ref("small-c"), ref("small-d")
	t0 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), framework.CacheOnNode(ns, "update", node.Name(), first))).To(Succeed())
	c := framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded), "failures: %v", c.Status.Failures)
	rec.Await(g, ConsistOf("pull "+first+" "+node.Name()))
	// An update pulls what the node does not report; the kubelet lists the
	// new image in the node's status a few seconds after its pull.
	framework.WaitNodesReport(g, k8s, []string{node.Name()}, first)

	t1 := framework.Tick()
	// The controller may still write the create's status; the edit goes on a fresh read.
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(context.Background(), key, c); err != nil {
			return err
		}
		c.Spec.CacheSpec[0].Images = []string{first, added}
		return k8s.Update(context.Background(), c)
	})).To(Succeed())
	c = framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheUpdate, t1, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded), "failures: %v", c.Status.Failures)
	rec.Await(g, ConsistOf("pull "+added+" "+node.Name()))
	g.Expect(inRuntime(g, first)).To(BeTrue())
	g.Expect(inRuntime(g, added)).To(BeTrue())
}

// testPurgeRemovesFromTheRuntime: the delete Jobs run our CRI client against the node's
// containerd socket, and the images are gone from the runtime, not merely from a status.
func testPurgeRemovesFromTheRuntime(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := framework.Namespace(t, k8s, "realnode-")
	key := client.ObjectKey{Namespace: ns, Name: "purge"}
	images := imageRefs("small-e", "small-f")
	t0 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), framework.CacheOnNode(ns, "purge", node.Name(), images...))).To(Succeed())
	c := framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded), "failures: %v", c.Status.Failures)
	for _, ref := range images {
		g.Expect(inRuntime(g, ref)).To(BeTrue(), "%s is not in containerd before the purge", ref)
	}

	t1 := framework.Annotate(g, k8s, key, v1alpha2.PurgeAnnotation)
	c = framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCachePurge, t1, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded), "failures: %v", c.Status.Failures)
	g.Expect(c.Status.Message).To(Equal(v1alpha2.ImageCacheMessageImagesDeletedSuccessfully))
	for _, ref := range images {
		g.Expect(inRuntime(g, ref)).To(BeFalse(), "%s is still in containerd after the purge", ref)
	}
	// Delete Jobs run in the controller's namespace.
	deleteNS := commands.NewControllerOptions().DeleteJobNamespace
	js := jobsOf(g, deleteNS, client.MatchingLabels{jobs.LabelImageCache: "purge", jobs.LabelKind: string(jobs.Delete), jobs.LabelCacheNamespace: ns})
	g.Expect(js).To(HaveLen(len(images)))
	for _, j := range js {
		pods := podsOf(g, deleteNS, j.Name)
		g.Expect(pods).To(HaveLen(1))
		g.Expect(pods[0].Status.ContainerStatuses).To(HaveLen(1))
		term := pods[0].Status.ContainerStatuses[0].State.Terminated
		g.Expect(term).NotTo(BeNil())
		g.Expect(term.ExitCode).To(BeZero())
		g.Expect(term.Message).To(ContainSubstring("removed"), "the CRI client's answer, from the termination log")
		t.Logf("delete Job of %s ran %s: %s", j.Annotations[jobs.AnnotationImage], took(j), term.Message)
	}
}

// testRestartRemovesRetainedJobs: a restarted controller deletes the retained Job whose pod
// is still backing off, and the kubelet really tears the pod down (the pod object goes only
// once the kubelet has confirmed it stopped).
func testRestartRemovesRetainedJobs(t *testing.T, stop func(), ns string, gr jobs.Granularity) {
	g := NewWithT(t)
	retained := jobsOf(g, ns, client.MatchingLabels{jobs.LabelImageCache: "missing"})
	g.Expect(retained).NotTo(BeEmpty())
	pods := &corev1.PodList{}
	g.Expect(k8s.List(context.Background(), pods, client.InNamespace(ns))).To(Succeed())
	g.Expect(pods.Items).NotTo(BeEmpty())
	stop()
	begin := time.Now()
	runController(t, jobs.Retain, gr)
	g.Eventually(func(g Gomega) {
		g.Expect(jobsOf(g, ns, client.MatchingLabels{})).To(BeEmpty())
		l := &corev1.PodList{}
		g.Expect(k8s.List(context.Background(), l, client.InNamespace(ns))).To(Succeed())
		g.Expect(l.Items).To(BeEmpty())
	}).WithTimeout(framework.ClusterTimeout).WithPolling(250 * time.Millisecond).Should(Succeed())
	t.Logf("retained Jobs and their pods gone %s after the restart", time.Since(begin).Round(time.Millisecond))
}
