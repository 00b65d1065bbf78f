package cachetrim

import (
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kubefledged/kube-fledged/internal/results"
)

func meta() metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: "j", Namespace: "ns",
		Labels:        map[string]string{"a": "b"},
		Annotations:   map[string]string{"c": "d"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}},
	}
}

func TestTransforms(t *testing.T) {
	failedPod := &corev1.Pod{
		ObjectMeta: meta(),
		Spec:       corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "x"}}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "not found"}}}}},
	}
	failedJob := &batchv1.Job{
		ObjectMeta: meta(),
		Spec:       batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}},
		Status: batchv1.JobStatus{Failed: 1, Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}}},
	}
	tests := []struct {
		name  string
		fn    cache.TransformFunc
		in    any
		check func(g Gomega, out any)
	}{
		{"job drops spec and managed fields, keeps the rest", Job, failedJob.DeepCopy(), func(g Gomega, out any) {
			j := out.(*batchv1.Job)
			g.Expect(j.Spec).To(Equal(batchv1.JobSpec{}))
			g.Expect(j.ManagedFields).To(BeNil())
			g.Expect(j.Labels).To(Equal(map[string]string{"a": "b"}))
			g.Expect(j.Annotations).To(Equal(map[string]string{"c": "d"}))
			g.Expect(j.Status).To(Equal(failedJob.Status))
		}},
		{"pod keeps its node and status", Pod, failedPod.DeepCopy(), func(g Gomega, out any) {
			p := out.(*corev1.Pod)
			g.Expect(p.Spec).To(Equal(corev1.PodSpec{NodeName: "n1"}))
			g.Expect(p.ManagedFields).To(BeNil())
			g.Expect(p.Status).To(Equal(failedPod.Status))
		}},
		{"node keeps spec, labels and images", Node, &corev1.Node{ObjectMeta: meta(),
			Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: "k"}}},
			Status: corev1.NodeStatus{Images: []corev1.ContainerImage{{Names: []string{"i"}}}}}, func(g Gomega, out any) {
			n := out.(*corev1.Node)
			g.Expect(n.ManagedFields).To(BeNil())
			g.Expect(n.Spec.Taints).To(HaveLen(1))
			g.Expect(n.Status.Images).To(HaveLen(1))
			g.Expect(n.Labels).To(HaveKey("a"))
		}},
		{"other types pass through", Job, failedPod.DeepCopy(), func(g Gomega, out any) {
			g.Expect(out).To(Equal(failedPod))
		}},
		{"tombstones pass through", Pod, cache.DeletedFinalStateUnknown{Key: "ns/j"}, func(g Gomega, out any) {
			g.Expect(out).To(Equal(cache.DeletedFinalStateUnknown{Key: "ns/j"}))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			out, err := tt.fn(tt.in)
			g.Expect(err).NotTo(HaveOccurred())
			tt.check(g, out)
		})
	}
}

// The settled result of a Job must not change when read from a trimmed
// cache: that is what the trim may cost and must not.
func TestResultsUnchangedByTrim(t *testing.T) {
	g := NewWithT(t)
	job := &batchv1.Job{ObjectMeta: meta(), Status: batchv1.JobStatus{Failed: 1, Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}}}}
	job.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Image: "x"}}
	pod := corev1.Pod{ObjectMeta: meta(), Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c"}}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "manifest unknown"}}}}}}
	want := results.FromJob(job, []corev1.Pod{pod})

	tj, _ := Job(job.DeepCopy())
	tp, _ := Pod(pod.DeepCopy())
	got := results.FromJob(tj.(*batchv1.Job), []corev1.Pod{*tp.(*corev1.Pod)})
	g.Expect(got).To(Equal(want))
	g.Expect(got.Message).To(ContainSubstring("manifest unknown"))
}
