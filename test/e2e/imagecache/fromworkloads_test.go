package imagecache_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// TestFromWorkloadsPullsBeforeAPausedRollout: a cache whose list follows
// the templates of the app=web workloads pulls a paused Deployment's new
// image onto every node of its pool as soon as the template changes, while
// the Deployment stays paused: the sandbox's Deployment controller makes no
// ReplicaSet and no pod of the new template, so no pod could have pulled
// it. The pool is tainted against the Deployment, so its nodes hold only
// what the cache's Jobs pull, and they report it (status.images).
func TestFromWorkloadsPullsBeforeAPausedRollout(t *testing.T) {
	g := NewWithT(t)
	f := followWeb(t, g, "rollout", func(l *v1alpha2.CacheSpecImages) {
		l.FromWorkloads = &v1alpha2.FromWorkloads{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
	}, nil)
	ns, key, poolNodes, rec := f.ns, f.key, f.nodes, f.rec

	// A paused Deployment: its template's images, the init container's
	// included, are pulled though it runs no pod.
	labels := map[string]string{"app": "web"}
	d := webDeployment(ns, 2)
	d.Spec.Paused = true
	t1 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), d)).To(Succeed())
	c := framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheUpdate, t1, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	rec.Await(g, ConsistOf(append(each("pull", "busybox:1.37", poolNodes...), each("pull", "nginx:1.27", poolNodes...)...)))
	used := ns + "/Deployment/web"
	g.Expect(podImages(c)).To(Equal([]string{"0 pods, 1 workloads, 2 images", "busybox:1.37 0 1 " + used, "nginx:1.27 0 1 " + used}))
	cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha2.ConditionPodsResolved)
	g.Expect(cond).NotTo(BeNil())
	g.Expect(cond.Message).To(Equal("1 workload(s) selected, 2 image(s) cached for them"))
	// The nodes report images by their full names, as kubelets do.
	framework.WaitNodesReport(g, k8s, poolNodes, "docker.io/library/busybox:1.36", "docker.io/library/busybox:1.37", "docker.io/library/nginx:1.27")

	// Its image changed, still paused: the new image is pulled onto every
	// node of the pool, and the cache says every node holds it.
	t2 := framework.Tick()
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(d), d)).To(Succeed())
	d.Spec.Template.Spec.Containers[0].Image = "nginx:1.28"
	g.Expect(k8s.Update(context.Background(), d)).To(Succeed())
	c = framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheUpdate, t2, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	g.Expect(c.Status.Failures).To(BeEmpty())
	rec.Await(g, ConsistOf(each("pull", "nginx:1.28", poolNodes...)))
	g.Expect(podImages(c)).To(Equal([]string{"0 pods, 1 workloads, 2 images", "busybox:1.37 0 1 " + used, "nginx:1.28 0 1 " + used}))
	ready := meta.FindStatusCondition(c.Status.Conditions, v1alpha2.ConditionReady)
	g.Expect(ready).NotTo(BeNil())
	g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), ready.Message)
	g.Expect(c.Status.ProcessedSpec.CacheSpec[0].Images).To(Equal([]string{"busybox:1.36"}), "the record of the spec keeps what was written")
	framework.WaitNodesReport(g, k8s, poolNodes, "docker.io/library/nginx:1.28")

	// And the Deployment is still paused, no pod of its new template made.
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(d), d)).To(Succeed())
	g.Expect(d.Spec.Paused).To(BeTrue())
	pods := &corev1.PodList{}
	g.Expect(k8s.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels(labels))).To(Succeed())
	for _, p := range pods.Items {
		for _, ctr := range p.Spec.Containers {
			g.Expect(ctr.Image).NotTo(Equal("nginx:1.28"), "pod %s runs the new template", p.Name)
		}
	}
	g.Expect(rec.Take()).To(BeEmpty(), "the image the template left is dropped, deleted from no node")
}

// TestFromWorkloadsTakenInWhileRunning: an image that a followed
// Deployment's template starts naming while an operation of the cache runs
// is pulled by that very operation, not by one after it. The operation is
// held until the pull deadline by the template's first image, whose pull
// never ends on kwok; the image added to the paused Deployment meanwhile
// gets its Jobs on every node of the pool while it still runs, and its end
// counts the image with the others, pulled on every node.
func TestFromWorkloadsTakenInWhileRunning(t *testing.T) {
	g := NewWithT(t)
	f := followWeb(t, g, "takein", func(l *v1alpha2.CacheSpecImages) {
		l.FromWorkloads = &v1alpha2.FromWorkloads{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
	}, actsWhileHanging)
	ns, key, poolNodes, rec := f.ns, f.key, f.nodes, f.rec

	never := sandbox.HangPrefix + "never:1"
	d := webDeployment(ns, 1)
	d.Spec.Paused = true
	d.Spec.Template.Spec.InitContainers = nil
	d.Spec.Template.Spec.Containers[0].Image = never
	t1 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), d)).To(Succeed())
	rec.Await(g, ConsistOf(each("pull", never, poolNodes...)))
	held := &v1alpha2.ImageCache{}
	g.Expect(k8s.Get(context.Background(), key, held)).To(Succeed())
	g.Expect(held.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusProcessing))
	g.Expect(held.Status.Reason).To(Equal(v1alpha2.ImageCacheReasonImageCacheUpdate))
	start := held.Status.StartTime

	// A second container: its image's Jobs start while the update runs.
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(d), d)).To(Succeed())
	d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{Name: "sidecar", Image: "nginx:1.28"})
	g.Expect(k8s.Update(context.Background(), d)).To(Succeed())
	var pulls []string
	g.Eventually(func() []string { pulls = append(pulls, rec.Take()...); return pulls }).
		WithTimeout(opTimeout).Should(ContainElements(each("pull", "nginx:1.28", poolNodes...)))
	g.Expect(pulls).To(ConsistOf(each("pull", "nginx:1.28", poolNodes...)), "nothing else is pulled: the hanging pulls still run")
	g.Expect(k8s.Get(context.Background(), key, held)).To(Succeed())
	g.Expect(held.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusProcessing), "the Jobs started while the update ran")
	g.Expect(held.Status.StartTime).To(Equal(start), "in the update that was running, not one after it")
	hasCacheEvent(g, ns, key.Name, "Normal PodImagesAdded", "nginx:1.28")

	// Its end, at the hanging pull's deadline, counts the image pulled on
	// every node, and the nodes report it.
	c := framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheUpdate, t1, opTimeout)
	g.Expect(c.Status.StartTime).To(Equal(start), "the end is the held update's")
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusFailed))
	var failed []string
	for img, l := range c.Status.Failures {
		for _, nf := range l {
			failed = append(failed, img+" "+nf.Node)
		}
	}
	g.Expect(failed).To(ConsistOf(never+" "+poolNodes[0], never+" "+poolNodes[1]), "only the hanging pulls failed")
	g.Expect(c.Status.Counts.Desired).To(BeEquivalentTo(6), "busybox:1.36, the hanging image and nginx:1.28 on two nodes")
	g.Expect(c.Status.Counts.Failed).To(BeEquivalentTo(2))
	g.Expect(c.Status.Counts.Succeeded + c.Status.Counts.AlreadyPresent).To(BeEquivalentTo(4))
	used := ns + "/Deployment/web"
	g.Expect(podImages(c)).To(ConsistOf("0 pods, 1 workloads, 2 images", "nginx:1.28 0 1 "+used, never+" 0 1 "+used))
	framework.WaitNodesReport(g, k8s, poolNodes, "docker.io/library/nginx:1.28")
	g.Expect(rec.Take()).To(BeEmpty(), "nothing pulled after the update")
}
