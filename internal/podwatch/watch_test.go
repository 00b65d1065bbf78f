package podwatch

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kubefledged/kube-fledged/internal/podimages"
)

func TestPodKeepsWhatFromPodsReads(t *testing.T) {
	g := NewWithT(t)
	full := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "shop", UID: "u", ResourceVersion: "7",
			Labels:        map[string]string{"app": "web"},
			Annotations:   map[string]string{"big": "annotation"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
			OwnerReferences: []metav1.OwnerReference{
				{Kind: "Other", Name: "not-controller"},
				{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d8f", UID: "rs", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{
			NodeName:       "n1",
			InitContainers: []corev1.Container{{Name: "init", Image: "busybox:1.36", Command: []string{"sh"}}},
			Containers:     []corev1.Container{{Name: "web", Image: "nginx:1.27", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}},
			EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
				Name: "debug", Image: "busybox:1.37", Args: []string{"x"}}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1"},
	}
	out, err := Pod(full.DeepCopy())
	g.Expect(err).NotTo(HaveOccurred())
	p := out.(*corev1.Pod)
	g.Expect(p.Annotations).To(BeNil())
	g.Expect(p.ManagedFields).To(BeNil())
	g.Expect(p.Labels).To(Equal(full.Labels))
	g.Expect(p.Status).To(Equal(corev1.PodStatus{}))
	g.Expect(p.Spec.NodeName).To(BeEmpty())
	g.Expect(p.Spec.Containers).To(Equal([]corev1.Container{{Name: "web", Image: "nginx:1.27"}}))
	g.Expect(podimages.Of(p)).To(Equal(podimages.Of(full)))
	g.Expect(podimages.UsedBy(p)).To(Equal("shop/ReplicaSet/web-5d8f"))

	ns, err := Namespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"team": "web"},
		Annotations: map[string]string{"a": "b"}}, Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"kubernetes"}}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ns).To(Equal(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"team": "web"}}}))

	tomb := cache.DeletedFinalStateUnknown{Key: "shop/web-1"}
	g.Expect(Pod(tomb)).To(Equal(tomb))
}
