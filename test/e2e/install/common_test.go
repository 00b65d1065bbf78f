package install_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/kubectl/pkg/util/podutils"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/test/framework"
)

// Bounds of the waits: generous, for two cores shared with other packages' clusters. On an
// idle machine each step takes seconds; the log says how many.
const (
	readyTimeout = 3 * time.Minute // install to a Ready controller, its image pulled
	cacheTimeout = 3 * time.Minute // a cache of two images to Succeeded
	rollTimeout  = 3 * time.Minute // a changed Deployment rolled out
	poll         = 250 * time.Millisecond
)

// webhookName is the one webhook of the chart's ValidatingWebhookConfiguration: the API
// server names it in every refusal of ours.
const webhookName = "validate-image-cache.kubefledged.io"

// installation is one way in, as the common end sees it.
type installation struct {
	// how names the way in, for the log.
	how string
	// began is when the install started: the figure "install to Ready" counts from it.
	began time.Time
	// namespace and deployment are where the controller runs.
	namespace, deployment string
	// webhookConfiguration is the ValidatingWebhookConfiguration the install made.
	webhookConfiguration string
	// image is what the install names our image by: the controller's container and the
	// Jobs' helpers must run it. Empty means ourImage, the chart's default.
	image string
	// setRetention changes the controller's --job-retention-policy the install's own way
	// (helm upgrade, an edit of a KubeFledged resource) and returns once the change is
	// made; the common end waits for the roll.
	setRetention func(t *testing.T, policy string)
}

// checkInstall is the end every install path shares. It starts from an install with the
// retain policy whose controller is scheduled onto the real node, and checks in turn:
// the controller runs, Ready, from the image this tree built; its webhook refuses a bad
// ImageCache through its Service; a cache of pushed images ends Succeeded with the images
// in the node's containerd and its Jobs kept, labelled with their result; and after the
// policy is changed to delete, the Deployment rolls and a new cache's Jobs go.
func checkInstall(t *testing.T, in installation) {
	g := NewWithT(t)
	pod := rolledOut(g, in, "retain", readyTimeout)
	t.Logf("%s: install to a Ready controller in %s", in.how, time.Since(in.began).Round(time.Millisecond))
	checkOurImage(g, pod, in.ourImage())

	t0 := time.Now()
	refusedByWebhook(g, in)
	t.Logf("%s: the webhook refused a bad ImageCache %s after the controller was Ready", in.how, time.Since(t0).Round(time.Millisecond))

	t0 = time.Now()
	retained := cacheSucceeds(g, in.namespace, "retained", retainedImages(in.how))
	t.Logf("%s: cache of %d images Succeeded in %s (%s from its create)", in.how, len(retainedImages(in.how)),
		retained.Status.CompletionTime.Sub(retained.Status.StartTime.Time), time.Since(t0).Round(time.Millisecond))
	js := jobsOf(g, in.namespace, "retained")
	// Counted by image, not by Job: a node's pull Job holds every image of
	// the node, a Job per (image, node) one; either way each image was
	// pulled once onto the node and its Job is kept.
	g.Expect(imagesOf(js)).To(ConsistOf(retainedImages(in.how)), "retain keeps the Jobs that pulled each image once")
	for _, j := range js {
		g.Expect(j.Labels).To(HaveKeyWithValue(jobs.LabelResult, jobs.ResultSucceeded), "Job %s", j.Name)
		g.Expect(j.Annotations).To(HaveKeyWithValue(jobs.AnnotationNode, node.Name()), "Job %s", j.Name)
	}
	checkHelperImage(g, js, in.ourImage())
	onlyOnTheRealNode(g, in.namespace)

	t0 = time.Now()
	in.setRetention(t, "delete")
	rolledOut(g, in, "delete", rollTimeout)
	t.Logf("%s: the change to delete rolled the controller in %s", in.how, time.Since(t0).Round(time.Millisecond))
	// A controller starting up deletes every Job a predecessor left (the original's
	// contract: a restart aborts and reruns), retained ones included.
	g.Eventually(func(g Gomega) {
		g.Expect(jobsOf(g, in.namespace, "retained")).To(BeEmpty())
	}).WithTimeout(rollTimeout).WithPolling(poll).Should(Succeed(), "the new controller kept its predecessor's Jobs")

	seen := framework.RecordJobs(t, kube, in.namespace, labels.Set{jobs.LabelImageCache: "deleted"})
	t0 = time.Now()
	deleted := cacheSucceeds(g, in.namespace, "deleted", deletedImages(in.how))
	t.Logf("%s: cache of %d images Succeeded under delete in %s (%s from its create)", in.how, len(deletedImages(in.how)),
		deleted.Status.CompletionTime.Sub(deleted.Status.StartTime.Time), time.Since(t0).Round(time.Millisecond))
	// The log's watch can trail the list that finds the Jobs gone: both are waited for.
	g.Eventually(func(g Gomega) {
		g.Expect(jobsOf(g, in.namespace, "deleted")).To(BeEmpty(), "delete left Jobs behind")
		var added, gone []string
		for _, ev := range seen.Events() {
			switch ev.Type {
			case watch.Added:
				added = append(added, ev.Job.Name)
			case watch.Deleted:
				gone = append(gone, ev.Job.Name)
			}
		}
		g.Expect(gone).To(ConsistOf(added), "Jobs deleted again")
	}).WithTimeout(cacheTimeout).WithPolling(poll).Should(Succeed())
	g.Expect(imagesOf(seen.Created())).To(ConsistOf(deletedImages(in.how)), "images pulled by the Jobs created for the cache under delete, each once")
	onlyOnTheRealNode(g, in.namespace)
}

func (in installation) ourImage() string {
	if in.image != "" {
		return in.image
	}
	return ourImage
}

// checkHelperImage holds the Jobs' helper containers (a pull Job's init container, a
// delete Job's one container) to the controller's own image, by the name the install
// gave it: a mirror's name reaches the Jobs too.
func checkHelperImage(g Gomega, js []batchv1.Job, image string) {
	g.Expect(js).NotTo(BeEmpty())
	for _, j := range js {
		spec := j.Spec.Template.Spec
		helpers := spec.InitContainers
		if len(helpers) == 0 {
			helpers = spec.Containers
		}
		for _, c := range helpers {
			g.Expect(c.Image).To(Equal(image), "Job %s, container %s", j.Name, c.Name)
		}
	}
}

// rolledOut waits until the controller Deployment has rolled out one pod, Ready, with the
// given retention policy in its arguments and no other pod beside it, and returns it.
func rolledOut(g Gomega, in installation, policy string, timeout time.Duration) *corev1.Pod {
	ctx := context.Background()
	var pod *corev1.Pod
	g.Eventually(func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: in.namespace, Name: in.deployment}, d)).To(Succeed())
		g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--job-retention-policy="+policy), "the Deployment's args")
		g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation), "the Deployment controller has not seen the change")
		g.Expect(d.Status.UpdatedReplicas).To(BeEquivalentTo(1))
		g.Expect(d.Status.ReadyReplicas).To(BeEquivalentTo(1))
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		g.Expect(err).NotTo(HaveOccurred())
		pods := &corev1.PodList{}
		g.Expect(k8s.List(ctx, pods, client.InNamespace(in.namespace), client.MatchingLabelsSelector{Selector: sel})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1), "one controller pod, the old one gone")
		p := pods.Items[0]
		g.Expect(p.Spec.Containers[0].Args).To(ContainElement("--job-retention-policy=" + policy))
		g.Expect(podutils.IsPodReady(&p)).To(BeTrue(), "pod %s not Ready: %s", p.Name, podState(&p))
		pod = &p
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed(), func() string { return rollout(in.namespace) })
	return pod
}

// rollout says, for a rollout that did not end, what the namespace's ReplicaSets and
// pods are and the Warning Events there: why a ReplicaSet had no pod is only in them.
func rollout(ns string) string {
	ctx := context.Background()
	var out []string
	rss := &appsv1.ReplicaSetList{}
	if err := k8s.List(ctx, rss, client.InNamespace(ns)); err == nil {
		for _, rs := range rss.Items {
			line := fmt.Sprintf("ReplicaSet %s: %d/%d ready", rs.Name, rs.Status.ReadyReplicas, rs.Status.Replicas)
			for _, c := range rs.Status.Conditions {
				line += fmt.Sprintf("; %s %s: %s", c.Type, c.Reason, c.Message)
			}
			out = append(out, line)
		}
	}
	pods := &corev1.PodList{}
	if err := k8s.List(ctx, pods, client.InNamespace(ns)); err == nil {
		for i := range pods.Items {
			out = append(out, "pod "+pods.Items[i].Name+": "+podState(&pods.Items[i]))
		}
	}
	events := &corev1.EventList{}
	if err := k8s.List(ctx, events, client.InNamespace(ns)); err == nil {
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning {
				out = append(out, fmt.Sprintf("event %s/%s %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message))
			}
		}
	}
	return strings.Join(out, "\n")
}

// podState says where a pod is stuck, for a failed wait.
func podState(p *corev1.Pod) string {
	var out []string
	out = append(out, fmt.Sprintf("phase %s on %q", p.Status.Phase, p.Spec.NodeName))
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			out = append(out, fmt.Sprintf("%s: %s %s", c.Type, c.Reason, c.Message))
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		switch {
		case cs.State.Waiting != nil:
			out = append(out, fmt.Sprintf("%s waiting: %s %s", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message))
		case cs.State.Terminated != nil:
			out = append(out, fmt.Sprintf("%s terminated: %s %s", cs.Name, cs.State.Terminated.Reason, cs.State.Terminated.Message))
		}
	}
	return strings.Join(out, "; ")
}

// checkOurImage holds the controller pod to the image this tree built: it runs on the real
// node (never a kwok one), under the name the install gave it, the kubelet reports the
// digest of the index we pushed under that name, and containerd holds, under that name,
// the config of this platform's manifest in it, so the node pulled its own platform's
// image and no other.
func checkOurImage(g Gomega, pod *corev1.Pod, image string) {
	g.Expect(pod.Spec.NodeName).To(Equal(node.Name()), "the controller is not on the real node")
	g.Expect(pod.Spec.Containers[0].Image).To(Equal(image))
	cs := pod.Status.ContainerStatuses
	g.Expect(cs).To(HaveLen(1))
	repo, digest, ok := strings.Cut(cs[0].ImageID, "@")
	g.Expect(ok).To(BeTrue(), "imageID %q has no digest", cs[0].ImageID)
	ref, err := name.ParseReference(image, name.Insecure)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(repo).To(Equal(ref.Context().Name()))
	g.Expect(digest).To(Equal(built.index.String()), "the pod's imageID is not the index we built")
	img, err := node.ImageStatus(context.Background(), image)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(img).NotTo(BeNil(), "containerd does not hold %s", image)
	g.Expect(img.Id).To(Equal(built.config.String()), "containerd holds another platform's image (manifest %s)", built.manifest)
}

// refusedByWebhook creates an ImageCache whose image reference no registry accepts: the
// CRD's schema lets it through, our webhook must refuse it, called by the API server
// through the install's Service.
func refusedByWebhook(g Gomega, in installation) {
	ctx := context.Background()
	g.Eventually(func(g Gomega) {
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: in.webhookConfiguration}, vwc)).To(Succeed())
		g.Expect(vwc.Webhooks).To(HaveLen(1))
		g.Expect(vwc.Webhooks[0].Name).To(Equal(webhookName))
		g.Expect(vwc.Webhooks[0].ClientConfig.CABundle).NotTo(BeEmpty(), "the controller has not written its CA yet")
	}).WithTimeout(readyTimeout).WithPolling(poll).Should(Succeed())
	bad := framework.CacheOnNode(in.namespace, "bad", node.Name(), "Not/A Valid:Reference")
	var err error
	// The Service's endpoint follows the pod's readiness by a moment: until it is there
	// the API server fails the call itself ("no endpoints available").
	g.Eventually(func(g Gomega) {
		err = k8s.Create(ctx, bad.DeepCopy())
		if err == nil {
			StopTrying("a bad ImageCache was admitted").Now()
		}
		g.Expect(err.Error()).To(ContainSubstring(`admission webhook %q denied the request`, webhookName))
	}).WithTimeout(readyTimeout).WithPolling(poll).Should(Succeed())
	g.Expect(apierrors.IsInvalid(err) || apierrors.IsForbidden(err)).To(BeTrue(), "refusal: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("spec.cacheSpec[0].images[0]"), "the refusal does not name the bad field")
	err = k8s.Get(ctx, client.ObjectKeyFromObject(bad), &v1alpha2.ImageCache{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the refused cache exists: %v", err)
}

// cacheSucceeds creates a cache of images and waits for its create to end Succeeded, with
// every image in the node's containerd.
func cacheSucceeds(g Gomega, ns, name string, images []string) *v1alpha2.ImageCache {
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, framework.CacheOnNode(ns, name, node.Name(), images...))).To(Succeed())
	c := &v1alpha2.ImageCache{}
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, c)).To(Succeed())
		g.Expect(c.Status.CompletionTime).NotTo(BeNil(), "status %q", c.Status.Status)
		g.Expect(c.Status.Reason).To(Equal(v1alpha2.ImageCacheReasonImageCacheCreate))
	}).WithTimeout(cacheTimeout).WithPolling(poll).Should(Succeed())
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded), "%s: %s; failures %v", c.Status.Reason, c.Status.Message, c.Status.Failures)
	for _, ref := range images {
		img, err := node.ImageStatus(ctx, ref)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(img).NotTo(BeNil(), "%s is not in the node's containerd", ref)
	}
	return c
}

func jobsOf(g Gomega, ns, cache string) []batchv1.Job {
	l := &batchv1.JobList{}
	g.Expect(k8s.List(context.Background(), l, client.InNamespace(ns), client.MatchingLabels{jobs.LabelImageCache: cache})).To(Succeed())
	return l.Items
}

// onlyOnTheRealNode checks that no pod of the install (controller or Job) went to the kwok
// node, where it would only seem to run.
func onlyOnTheRealNode(g Gomega, ns string) {
	pods := &corev1.PodList{}
	g.Expect(k8s.List(context.Background(), pods, client.InNamespace(ns))).To(Succeed())
	for _, p := range pods.Items {
		g.Expect(p.Spec.NodeName).To(BeElementOf(node.Name(), ""), "pod %s", p.Name)
	}
}

// imagesOf is every image the Jobs pull, once per Job that pulls it.
func imagesOf(js []batchv1.Job) []string {
	var out []string
	for i := range js {
		out = append(out, jobs.ImagesOf(&js[i])...)
	}
	return out
}
