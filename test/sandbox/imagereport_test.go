package sandbox

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestImageChanges(t *testing.T) {
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	done := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}
	waiting := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull"}}
	pod := func(phase corev1.PodPhase, a, b corev1.ContainerState) *corev1.Pod {
		return &corev1.Pod{
			Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "a", Image: "r.example/a:1"},
				{Name: "rm", Image: "helper:1", Command: []string{"cri-rmi", "--image=r.example/old:1"}},
			}},
			Status: corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{
				{Name: "a", Image: "r.example/a:1", State: a},
				{Name: "rm", Image: "helper:1", State: b},
			}},
		}
	}
	deleted := pod(corev1.PodSucceeded, done, done)
	deleted.DeletionTimestamp = ptr.To(metav1.Now())
	for _, tc := range []struct {
		name        string
		before, now *corev1.Pod
		want        map[string]bool
	}{
		{"a new pod lists what has started", nil, pod(corev1.PodRunning, running, waiting), map[string]bool{"r.example/a:1": true}},
		{"nothing started", nil, pod(corev1.PodPending, waiting, waiting), map[string]bool{}},
		{"a start is a change", pod(corev1.PodPending, waiting, waiting), pod(corev1.PodRunning, running, waiting), map[string]bool{"r.example/a:1": true}},
		{"a running container that ends is no new pull", pod(corev1.PodRunning, running, running), pod(corev1.PodRunning, done, running), map[string]bool{}},
		{"success removes the delete Job's image", pod(corev1.PodRunning, done, running), pod(corev1.PodSucceeded, done, done), map[string]bool{"r.example/old:1": false}},
		{"a later event of an ended pod changes nothing", pod(corev1.PodSucceeded, done, done), deleted, map[string]bool{}},
		{"an ended pod first seen lists and removes", nil, deleted, map[string]bool{"r.example/a:1": true, "helper:1": true, "r.example/old:1": false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(imageChanges(tc.before, tc.now)).To(Equal(tc.want))
		})
	}
}

// TestLostImageStaysLost: once a node has lost an image (a test's stand-in for a kubelet's
// image garbage collection), the later events of the pod that pulled it do not list it again.
// Another pull on the node, reported after them (the reporter applies a node's changes in
// the order the pods' events came), shows the reporter has seen them.
func TestLostImageStaysLost(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	s, c := parallel(t)
	ns := namespace(t, c)
	g.Expect(s.CreateNodes(ctx, NodeSpec{Name: "lost"})).To(Succeed())
	t.Cleanup(func() { _ = s.DeleteNode(ctx, "lost") })
	listed := func(g Gomega) []string {
		n, err := c.CoreV1().Nodes().Get(ctx, "lost", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		var names []string
		for _, img := range n.Status.Images {
			names = append(names, img.Names...)
		}
		return names
	}
	run := func(name, image string) {
		_, err := c.BatchV1().Jobs(ns).Create(ctx, pinnedJob(name, "lost", image), metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(succeeded(ctx, c, ns, name), clusterTimeout, 50*time.Millisecond).Should(Equal(int32(1)))
		g.Eventually(listed, clusterTimeout, 50*time.Millisecond).Should(ContainElement(image))
	}
	run("first", "registry.example/gone:1")
	g.Expect(s.SetNodeImages(ctx, "lost", nil)).To(Succeed())
	g.Expect(c.BatchV1().Jobs(ns).Delete(ctx, "first", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)})).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(jobPods(ctx, c, ns, "first")).To(BeEmpty())
	}, clusterTimeout, 100*time.Millisecond).Should(Succeed())
	run("second", "registry.example/kept:1")
	g.Expect(listed(g)).NotTo(ContainElement("registry.example/gone:1"))
}
