package realnode_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/sandbox/realnode"
)

// TestPausedRolloutStartsWithoutAPull: a cache follows the template of a
// Deployment on the real node (fromWorkloads). The Deployment is paused and
// its image changed; the cache pulls the new image into the node's
// containerd while the old pod runs on. Resumed, the Deployment's new pod
// starts without a pull: the kubelet says the image is already present on
// the machine, and the registry is never asked for it after the cache's
// pull. Without the cache the kubelet pulls it (its first pod, here).
func TestPausedRolloutStartsWithoutAPull(t *testing.T) {
	framework.NeedRealNode(t)
	g := NewWithT(t)
	runController(t, jobs.RetainNone, jobs.PerNode)
	ns := framework.Namespace(t, k8s, "rollout-")
	v1Ref, v2Ref := webImage(t, g, "rollout-web:v1"), webImage(t, g, "rollout-web:v2")

	d := realWeb(ns, v1Ref)
	g.Expect(k8s.Create(context.Background(), d)).To(Succeed())
	first := runningPod(g, ns, v1Ref)
	g.Expect(kubeletSays(g, ns, first)).To(ContainElement(ContainSubstring("Successfully pulled image")), "the first pod pulls")

	key := client.ObjectKey{Namespace: ns, Name: "web"}
	c := framework.CacheOnNode(ns, "web", node.Name())
	c.Spec.CacheSpec[0].FromWorkloads = &v1alpha2.FromWorkloads{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
	t0 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), c)).To(Succeed())
	c = framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded), "failures: %v", c.Status.Failures)

	// Paused, its image changed: the cache pulls the new one, no pod runs it.
	g.Expect(inRuntime(g, v2Ref)).To(BeFalse())
	t1 := framework.Tick()
	setWeb(g, d, func(d *appsv1.Deployment) {
		d.Spec.Paused = true
		d.Spec.Template.Spec.Containers[0].Image = v2Ref
	})
	c = framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheUpdate, t1, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded), "failures: %v", c.Status.Failures)
	g.Expect(inRuntime(g, v2Ref)).To(BeTrue(), "the cache pulled the paused template's image")
	pods := &corev1.PodList{}
	g.Expect(k8s.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{"app": "web"})).To(Succeed())
	for _, p := range pods.Items {
		g.Expect(p.Spec.Containers[0].Image).To(Equal(v1Ref), "pod %s runs the paused template", p.Name)
	}

	// Resumed: the new pod finds the image on the node.
	resumed := framework.Tick()
	setWeb(g, d, func(d *appsv1.Deployment) { d.Spec.Paused = false })
	second := runningPod(g, ns, v2Ref)
	said := kubeletSays(g, ns, second)
	g.Expect(said).To(ContainElement(And(ContainSubstring(v2Ref), ContainSubstring("already present on machine"))), "the kubelet's Pulled events")
	g.Expect(said).NotTo(ContainElement(ContainSubstring("Successfully pulled image")))
	for _, r := range node.RegistryRequests(resumed) {
		g.Expect(r.Path).NotTo(ContainSubstring("rollout-web/manifests"), "the registry was asked for the image after the resume")
	}
	t.Logf("the resumed pod's kubelet events: %v", said)
}

// webImage pushes to the node's registry an image that runs the node's
// pause binary, with a layer of its own: each tag has content, and so an
// image ID, of its own.
func webImage(t *testing.T, g Gomega, repoTag string) string {
	t.Helper()
	pauseRef, err := name.ParseReference(node.Registry()+"/"+realnode.PauseRepo, name.Insecure)
	g.Expect(err).NotTo(HaveOccurred())
	pause, err := remote.Image(pauseRef, remote.WithContext(context.Background()))
	g.Expect(err).NotTo(HaveOccurred())
	layers, err := pause.Layers()
	g.Expect(err).NotTo(HaveOccurred())
	own, err := realnode.NewLayer(realnode.File{Path: "/data/tag.txt", Data: []byte(repoTag + "\n")})
	g.Expect(err).NotTo(HaveOccurred())
	img, err := realnode.NewImage([]string{"/pause"}, append(layers, own)...)
	g.Expect(err).NotTo(HaveOccurred())
	ref, err := node.Push(context.Background(), repoTag, img)
	g.Expect(err).NotTo(HaveOccurred())
	return ref
}

// realWeb is the Deployment web of one pod of image on the real node.
func realWeb(ns, image string) *appsv1.Deployment {
	labels := map[string]string{"app": "web"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector:                  map[string]string{corev1.LabelHostname: node.Name()},
					Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					TerminationGracePeriodSeconds: ptr.To(int64(0)),
					Containers:                    []corev1.Container{{Name: "web", Image: image, ImagePullPolicy: corev1.PullIfNotPresent}},
				},
			},
		},
	}
}

// setWeb changes the Deployment on a fresh read.
func setWeb(g Gomega, d *appsv1.Deployment, change func(*appsv1.Deployment)) {
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(d), d); err != nil {
			return err
		}
		change(d)
		return k8s.Update(context.Background(), d)
	})).To(Succeed())
}

// runningPod waits for a pod of the Deployment that runs image on the real
// node, its container started, and returns its name.
func runningPod(g Gomega, ns, image string) string {
	var found string
	g.Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(k8s.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{"app": "web"})).To(Succeed())
		found = ""
		for _, p := range pods.Items {
			if p.Spec.Containers[0].Image != image || p.Spec.NodeName != node.Name() || p.DeletionTimestamp != nil {
				continue
			}
			for _, cs := range p.Status.ContainerStatuses {
				if cs.State.Running != nil {
					found = p.Name
				}
			}
		}
		g.Expect(found).NotTo(BeEmpty(), "no pod of %s running on %s", image, node.Name())
	}).WithTimeout(opTimeout).Should(Succeed())
	return found
}

// kubeletSays are the messages of the kubelet's Pulled events of a pod.
func kubeletSays(g Gomega, ns, pod string) []string {
	var out []string
	g.Eventually(func(g Gomega) {
		out = nil
		l := &corev1.EventList{}
		g.Expect(k8s.List(context.Background(), l, client.InNamespace(ns))).To(Succeed())
		for _, e := range l.Items {
			if e.InvolvedObject.Name == pod && e.Reason == "Pulled" {
				out = append(out, strings.TrimSpace(e.Message))
			}
		}
		g.Expect(out).NotTo(BeEmpty(), "no Pulled event of %s yet", pod)
	}).WithTimeout(opTimeout).Should(Succeed())
	return out
}
