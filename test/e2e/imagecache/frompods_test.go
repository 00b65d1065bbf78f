package imagecache_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/commands"
	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// TestFromPodsFollowsADeployment: a cache whose list selects a
// Deployment's pods follows it through the Deployment controller of the
// sandbox's real control plane: created, scaled, its image changed, deleted.
// The pool the cache serves is tainted against the Deployment, so that its
// nodes hold only what the cache's Jobs pull (the fake nodes report the
// images their pods run). An image is pulled once, when the first pod runs
// it; a scale pulls nothing; an image no pod runs any more is dropped with
// an Event, and no delete Job ever runs.
func TestFromPodsFollowsADeployment(t *testing.T) {
	g := NewWithT(t)
	f := followWeb(t, g, "follow", func(l *v1alpha2.CacheSpecImages) {
		l.FromPods = &v1alpha2.FromPods{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
	}, nil)
	ns, key, poolNodes, rec := f.ns, f.key, f.nodes, f.rec

	// Created: its images, init container's included, are pulled at once.
	d := webDeployment(ns, 1)
	t1 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), d)).To(Succeed())
	c := framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheUpdate, t1, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	rec.Await(g, ConsistOf(append(each("pull", "busybox:1.37", poolNodes...), each("pull", "nginx:1.27", poolNodes...)...)))
	rs := c.Status.PodImages[0].Images[0].UsedBy
	g.Expect(rs).To(HavePrefix(ns + "/ReplicaSet/web-"))
	g.Expect(podImages(c)).To(Equal([]string{"1 pods, 2 images", "busybox:1.37 1 " + rs, "nginx:1.27 1 " + rs}))
	cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha2.ConditionPodsResolved)
	g.Expect(cond).NotTo(BeNil())
	g.Expect(cond.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(cond.Message).To(Equal("1 pod(s) selected, 2 image(s) cached for them"))

	// Scaled to three: the status counts them; nothing is pulled.
	scale(g, d, 3)
	eventually(g, key, []string{"3 pods, 2 images", "busybox:1.37 3 " + rs, "nginx:1.27 3 " + rs})
	g.Expect(rec.Take()).To(BeEmpty())

	// Its image changed: the new one is pulled as the rollout starts, the
	// old one dropped once its last pod is gone, deleted from no node.
	t2 := framework.Tick()
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(d), d)).To(Succeed())
	d.Spec.Template.Spec.Containers[0].Image = "nginx:1.28"
	g.Expect(k8s.Update(context.Background(), d)).To(Succeed())
	c = framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheUpdate, t2, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	rec.Await(g, ConsistOf(each("pull", "nginx:1.28", poolNodes...)))
	var rs2 string
	g.Eventually(func(g Gomega) {
		c := &v1alpha2.ImageCache{}
		g.Expect(k8s.Get(context.Background(), key, c)).To(Succeed())
		got := podImages(c)
		g.Expect(got).To(HaveLen(3))
		g.Expect(got[0]).To(Equal("3 pods, 2 images"))
		g.Expect(got[1]).To(HavePrefix("busybox:1.37 3 " + ns + "/ReplicaSet/web-"))
		g.Expect(got[2]).To(HavePrefix("nginx:1.28 3 " + ns + "/ReplicaSet/web-"))
		rs2 = c.Status.PodImages[0].Images[1].UsedBy
	}).WithTimeout(opTimeout).WithPolling(200 * time.Millisecond).Should(Succeed())
	g.Expect(rs2).NotTo(Equal(rs))
	hasCacheEvent(g, ns, key.Name, "Normal PodImagesDropped", "nginx:1.27")

	// Deleted: its images leave the cache; the named one stays.
	g.Expect(k8s.Delete(context.Background(), d, client.PropagationPolicy(metav1.DeletePropagationForeground))).To(Succeed())
	eventually(g, key, []string{"0 pods, 0 images"})
	hasCacheEvent(g, ns, key.Name, "Normal PodImagesDropped", "nginx:1.28")
	c = &v1alpha2.ImageCache{}
	g.Expect(k8s.Get(context.Background(), key, c)).To(Succeed())
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	g.Expect(c.Status.ProcessedSpec.CacheSpec[0].Images).To(Equal([]string{"busybox:1.36"}))
	g.Expect(rec.Take()).To(BeEmpty(), "nothing pulled for a delete, nothing deleted from the nodes")
}

func scale(g Gomega, d *appsv1.Deployment, replicas int32) {
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(d), d)).To(Succeed())
	d.Spec.Replicas = ptr.To(replicas)
	g.Expect(k8s.Update(context.Background(), d)).To(Succeed())
}

// podImages renders status.podImages of the cache's one list: its counts,
// then "image pods usedBy" per image; a list that counts workloads
// (fromWorkloads) says how many, and "image pods workloads usedBy".
// following is a cache that follows the app=web pods or workloads, on a
// pool of its own, after its create.
type following struct {
	ns    string
	key   client.ObjectKey
	nodes []string
	rec   *framework.JobLog
}

// followWeb makes a pool of two nodes tainted against every pod but the
// cache's Jobs, so that they hold only what the cache pulls (the fake
// nodes report the images their pods run), and a cache whose one list
// serves the pool with busybox:1.36 and follows what follow sets. It runs
// the controller, changed by mod, and waits for the create.
func followWeb(t *testing.T, g Gomega, prefix string, follow func(*v1alpha2.CacheSpecImages), mod func(*commands.ControllerOptions)) following {
	t.Helper()
	f := following{ns: namespace(t)}
	taint := corev1.Taint{Key: "e2e.kubefledged.io/pool", Value: "cache-only", Effect: corev1.TaintEffectNoSchedule}
	pool, sel := nodePool(t, g, prefix, sandbox.NodeSpec{Name: "a", Taints: []corev1.Taint{taint}},
		sandbox.NodeSpec{Name: "b", Taints: []corev1.Taint{taint}})
	f.nodes = []string{pool + "-a", pool + "-b"}
	f.rec = framework.RecordJobs(t, kube, f.ns, nil)
	runController(t, mod)

	f.key = client.ObjectKey{Namespace: f.ns, Name: "follows-web"}
	l := withSelector(sel, "busybox:1.36")
	l.Tolerations = []corev1.Toleration{{Key: taint.Key, Operator: corev1.TolerationOpEqual, Value: taint.Value, Effect: taint.Effect}}
	follow(&l)
	t0 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), newCache(f.ns, f.key.Name, l))).To(Succeed())
	c := framework.Final(g, k8s, f.key, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	f.rec.Await(g, ConsistOf(each("pull", "busybox:1.36", f.nodes...)))
	g.Expect(podImages(c)).To(Equal([]string{"0 pods, 0 images"}))
	return f
}

// webDeployment is the Deployment web, labelled app=web, of replicas pods
// of busybox:1.37 (an init container) and nginx:1.27.
func webDeployment(ns string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": "web"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					InitContainers: []corev1.Container{{Name: "init", Image: "busybox:1.37"}},
					Containers:     []corev1.Container{{Name: "web", Image: "nginx:1.27"}},
				},
			},
		},
	}
}

func podImages(c *v1alpha2.ImageCache) []string {
	var out []string
	for _, l := range c.Status.PodImages {
		if l.Workloads == 0 {
			out = append(out, fmt.Sprintf("%d pods, %d images", l.Pods, l.Count))
		} else {
			out = append(out, fmt.Sprintf("%d pods, %d workloads, %d images", l.Pods, l.Workloads, l.Count))
		}
		for _, img := range l.Images {
			if l.Workloads == 0 {
				out = append(out, fmt.Sprintf("%s %d %s", img.Image, img.Pods, img.UsedBy))
			} else {
				out = append(out, fmt.Sprintf("%s %d %d %s", img.Image, img.Pods, img.Workloads, img.UsedBy))
			}
		}
	}
	return out
}

func eventually(g Gomega, key client.ObjectKey, want []string) {
	g.Eventually(func(g Gomega) []string {
		c := &v1alpha2.ImageCache{}
		g.Expect(k8s.Get(context.Background(), key, c)).To(Succeed())
		return podImages(c)
	}).WithTimeout(opTimeout).WithPolling(200 * time.Millisecond).Should(Equal(want))
}

// hasCacheEvent waits for an Event on the cache whose "Type Reason" is
// prefix and whose message names what.
func hasCacheEvent(g Gomega, ns, name, prefix, what string) {
	g.Eventually(func(g Gomega) []string {
		var out []string
		for _, e := range events(g, ns, name) {
			out = append(out, e.Type+" "+e.Reason+" "+e.Message)
		}
		return out
	}).WithTimeout(opTimeout).WithPolling(200 * time.Millisecond).Should(ContainElement(And(HavePrefix(prefix), ContainSubstring(what))))
}

// TestFromPodsHoldsNewNodes: with the startup taint, nodes that join get
// the images of the workload that waits for them before any of its pods
// lands, though no list names them: the cache follows the Deployment's
// pending pods, and each node is released only once their image is on it.
func TestFromPodsHoldsNewNodes(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	const n = 3
	pool := "followheld-" + rand.String(4)
	runController(t, withStartupTaint(5*time.Minute, "", func(o *commands.ControllerOptions) { o.Deadline.Value = 2 * time.Minute }))

	key := client.ObjectKey{Namespace: ns, Name: "follows-held"}
	l := withSelector(map[string]string{"pool": pool})
	l.FromPods = &v1alpha2.FromPods{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": pool}}}
	t0 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), newCache(ns, key.Name, l))).To(Succeed())
	framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	o := watchOrder(t, ns, pool)
	heldDeployment(t, g, ns, pool, n)
	g.Eventually(func(g Gomega) []string {
		c := &v1alpha2.ImageCache{}
		g.Expect(k8s.Get(context.Background(), key, c)).To(Succeed())
		g.Expect(c.Status.Status).NotTo(Equal(v1alpha2.ImageCacheActionStatusProcessing))
		got := podImages(c)
		if len(got) > 1 {
			got[1] = got[1][:strings.LastIndex(got[1], "/")] // the ReplicaSet's hash
		}
		return got
	}).WithTimeout(opTimeout).WithPolling(200 * time.Millisecond).Should(Equal(
		[]string{fmt.Sprintf("%d pods, 1 images", n), fmt.Sprintf("nginx:1.27-app %d %s/ReplicaSet", n, ns)}))

	specs := heldNodes(pool, n)
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	addNodes(t, g, specs...)
	g.Eventually(o.releasedCount).WithTimeout(3*time.Minute).WithPolling(time.Second).Should(Equal(n), "every node released")
	g.Eventually(o.boundCount).WithTimeout(2*time.Minute).WithPolling(time.Second).Should(Equal(n), func() string {
		return "every replica bound; " + pendingPods(g, ns, pool)
	})
	holds := o.checkReleasedAfterPulls(g, names, []string{"nginx:1.27-app"})
	t.Logf("fromPods with the startup taint: %d nodes held until the Deployment's image was on them: %s", n, summarise(holds))
}
