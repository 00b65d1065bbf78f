package framework

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubefledged/kube-fledged/internal/jobs"
)

func TestJobLog(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	pairJob := func(name, image string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			Labels:      map[string]string{jobs.LabelKind: "pull"},
			Annotations: map[string]string{jobs.AnnotationImage: image, jobs.AnnotationNode: "n1"}}}
	}
	kube := fake.NewClientset(pairJob("before", "busybox:1"))
	l := RecordJobs(t, kube, "ns", nil)

	_, err := kube.BatchV1().Jobs("ns").Create(ctx, pairJob("a", "nginx:1"), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(l.Created).Should(HaveLen(1))
	g.Expect(l.Take()).To(Equal([]string{"pull nginx:1 n1"}), "the Job created since, not the one there before")
	g.Expect(l.Events()).To(BeEmpty(), "Take forgets what it returned")

	g.Expect(kube.BatchV1().Jobs("ns").Delete(ctx, "a", metav1.DeleteOptions{})).To(Succeed())
	g.Eventually(l.Events).Should(HaveLen(1))
	g.Expect(l.Events()[0].Type).To(Equal(watch.Deleted))
	g.Expect(l.Take()).To(BeEmpty(), "a deletion is no Job created")

	node := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{jobs.LabelKind: "pull"},
		Annotations: map[string]string{jobs.AnnotationNode: "n2"}}}
	node.Spec.Template.Spec.Containers = []corev1.Container{{Image: "a:1"}, {Image: "b:2"}}
	g.Expect(Work(*node)).To(Equal([]string{"pull a:1 n2", "pull b:2 n2"}), "a node Job's work is one per container")
}
