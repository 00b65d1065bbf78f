package cachetrim

import (
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/kubefledged/kube-fledged/internal/results"
)

func meta() metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: "j", Namespace: "ns",
		Labels:          map[string]string{"a": "b"},
		Annotations:     map[string]string{"c": "d"},
		ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "m"}},
		OwnerReferences: []metav1.OwnerReference{{Kind: "ImageCache", Name: "c"}},
		Finalizers:      []string{"batch.kubernetes.io/job-tracking"},
	}
}

func TestTransforms(t *testing.T) {
	failedPod := &corev1.Pod{
		ObjectMeta: meta(),
		Spec:       corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "x"}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, PodIP: "10.0.0.1", HostIP: "10.1.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Image: "x", ImageID: "sha256:1", State: corev1.ContainerState{
				Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "not found"}}}}},
	}
	failedJob := &batchv1.Job{
		ObjectMeta: meta(),
		Spec:       batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}},
		Status: batchv1.JobStatus{Failed: 1, Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}},
			UncountedTerminatedPods: &batchv1.UncountedTerminatedPods{Failed: []types.UID{"u"}}},
	}
	tests := []struct {
		name  string
		fn    cache.TransformFunc
		in    any
		check func(g Gomega, out any)
	}{
		{"job keeps its name, labels, controller and conditions", Job, failedJob.DeepCopy(), func(g Gomega, out any) {
			j := out.(*batchv1.Job)
			g.Expect(j.Name).To(Equal("j"))
			g.Expect(j.Spec).To(Equal(batchv1.JobSpec{}))
			g.Expect(j.ManagedFields).To(BeNil())
			g.Expect(j.Annotations).To(BeNil())
			g.Expect(j.Finalizers).To(BeNil())
			g.Expect(j.Labels).To(Equal(map[string]string{"a": "b"}))
			g.Expect(j.OwnerReferences).To(Equal(failedJob.OwnerReferences))
			g.Expect(j.Status).To(Equal(batchv1.JobStatus{Conditions: failedJob.Status.Conditions}))
		}},
		{"pod keeps its node, phase and container states", Pod, failedPod.DeepCopy(), func(g Gomega, out any) {
			p := out.(*corev1.Pod)
			g.Expect(p.Name).To(Equal("j"))
			g.Expect(p.Labels).To(Equal(map[string]string{"a": "b"}))
			g.Expect(p.Spec).To(Equal(corev1.PodSpec{NodeName: "n1"}))
			g.Expect(p.ManagedFields).To(BeNil())
			g.Expect(p.OwnerReferences).To(BeNil())
			g.Expect(p.Status).To(Equal(corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{
				{Name: "c", State: failedPod.Status.ContainerStatuses[0].State}}}))
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
// cache, finished or at its deadline: that is what the trim may cost and
// must not.
func TestResultsUnchangedByTrim(t *testing.T) {
	failed := &batchv1.Job{ObjectMeta: meta(), Status: batchv1.JobStatus{Failed: 1, Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}}}}
	failed.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Image: "x"}}
	running := &batchv1.Job{ObjectMeta: meta(), Status: batchv1.JobStatus{Active: 1}}
	pod := func(phase corev1.PodPhase, st corev1.ContainerState) corev1.Pod {
		return corev1.Pod{ObjectMeta: meta(), Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c"}}},
			Status: corev1.PodStatus{Phase: phase, Reason: "R", Message: "M", HostIP: "10.0.0.1",
				Conditions:            []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
				InitContainerStatuses: []corev1.ContainerStatus{{Name: "copy", Image: "i", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}}},
				ContainerStatuses:     []corev1.ContainerStatus{{Name: "c", Image: "x", State: st}}}}
	}
	backoff := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "manifest unknown"}}
	crashed := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "boom"}}
	events := []corev1.Event{{Type: corev1.EventTypeWarning, Reason: "Failed", Message: "pull failed"}}
	tests := []struct {
		name   string
		job    *batchv1.Job
		pods   []corev1.Pod
		settle func(*batchv1.Job, []corev1.Pod) results.Outcome
	}{
		{"failed pull", failed, []corev1.Pod{pod(corev1.PodPending, backoff)}, func(j *batchv1.Job, p []corev1.Pod) results.Outcome { return results.FromJob(j, p) }},
		{"crashed", failed, []corev1.Pod{pod(corev1.PodFailed, crashed)}, func(j *batchv1.Job, p []corev1.Pod) results.Outcome { return results.FromJob(j, p) }},
		{"pending at the deadline", running, []corev1.Pod{pod(corev1.PodPending, backoff)}, func(j *batchv1.Job, p []corev1.Pod) results.Outcome { return results.AtDeadline(j, p, events) }},
		{"running at the deadline", running, []corev1.Pod{pod(corev1.PodRunning, corev1.ContainerState{Running: &corev1.ContainerStateRunning{}})}, func(j *batchv1.Job, p []corev1.Pod) results.Outcome { return results.AtDeadline(j, p, events) }},
		{"succeeded, Job not yet complete", running, []corev1.Pod{pod(corev1.PodSucceeded, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}})}, func(j *batchv1.Job, p []corev1.Pod) results.Outcome { return results.AtDeadline(j, p, nil) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			want := tt.settle(tt.job, tt.pods)
			tj, _ := Job(tt.job.DeepCopy())
			var trimmed []corev1.Pod
			for _, p := range tt.pods {
				tp, _ := Pod(p.DeepCopy())
				trimmed = append(trimmed, *tp.(*corev1.Pod))
			}
			got := tt.settle(tj.(*batchv1.Job), trimmed)
			g.Expect(got).To(Equal(want))
			g.Expect(got.State).NotTo(Equal(results.Pending))
		})
	}
}
