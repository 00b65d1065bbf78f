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
	})
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
