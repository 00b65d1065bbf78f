package results

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
)

func terminated(msg string, code int32) corev1.Pod {
	return pod(func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodSucceeded
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "delete", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg}}}}
	})
}

// A delete that kept its image is a success with the helper's reason, which
// Summarise lists apart from the failures; any other success stays plain.
func TestDeleted(t *testing.T) {
	ok := Outcome{State: Succeeded}
	kept := jobs.KeptReport(v1alpha2.KeptReasonInUse, "image nginx is used by 1 container(s)")
	for _, tc := range []struct {
		name string
		o    Outcome
		pods []corev1.Pod
		want Outcome
	}{
		{"kept: in use", ok, []corev1.Pod{terminated(kept, 0)}, Outcome{State: Succeeded, Reason: v1alpha2.KeptReasonInUse, Message: "image nginx is used by 1 container(s)"}},
		{"removed", ok, []corev1.Pod{terminated("image nginx (sha256:1) removed", 0)}, ok},
		{"no pod seen (a kwok node runs no helper)", ok, nil, ok},
		{"a pod with no termination message", ok, []corev1.Pod{terminated("", 0)}, ok},
		{"a failure stays one", Outcome{State: Failed, Reason: "Error", Message: "x"}, []corev1.Pod{terminated(kept, 0)}, Outcome{State: Failed, Reason: "Error", Message: "x"}},
		{"a report in a failed container is not read", ok, []corev1.Pod{terminated(kept, 1)}, ok},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(Deleted(tc.o, tc.pods)).To(Equal(tc.want))
		})
	}
}

func TestSummariseKept(t *testing.T) {
	g := NewWithT(t)
	inUse := Outcome{State: Succeeded, Reason: v1alpha2.KeptReasonInUse, Message: "used"}
	pinned := Outcome{State: Succeeded, Reason: v1alpha2.KeptReasonPinned, Message: "pinned"}
	s := Summarise([]Item{
		{Image: "a", Node: "n2", Outcome: inUse}, {Image: "a", Node: "n1", Outcome: pinned},
		{Image: "b", Node: "n1", Outcome: Outcome{State: Succeeded}},
	}, Unrun{}, true)
	g.Expect(s.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	g.Expect(s.Message).To(Equal(v1alpha2.ImageCacheMessageImagesDeletedSuccessfully))
	g.Expect(s.Failures).To(BeEmpty())
	g.Expect(s.Kept).To(Equal(map[string]v1alpha2.NodeReasonMessageList{
		"a": {{Node: "n1", Reason: v1alpha2.KeptReasonPinned, Message: "pinned"}, {Node: "n2", Reason: v1alpha2.KeptReasonInUse, Message: "used"}},
	}))
	g.Expect(Summarise([]Item{{Image: "b", Node: "n1", Outcome: Outcome{State: Succeeded}}}, Unrun{}, true).Kept).To(BeNil())
}
