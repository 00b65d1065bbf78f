package results

import (
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubefledged/kube-fledged/internal/pin"
)

func reportPod(msg string, exit int32) corev1.Pod {
	return pod(func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "pin",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Reason: "Error", Message: msg}}}}
	})
}

func TestPin(t *testing.T) {
	images := []string{"a:1", "b:1", "c:1"}
	tests := []struct {
		name string
		job  *batchv1.Job
		pods []corev1.Pod
		want PinOutcome
		done bool
	}{
		{name: "running", job: job(), pods: []corev1.Pod{pod(nil)}},
		// kwok completes the pod without running the helper.
		{name: "succeeded with no report: every image", job: job(cond(batchv1.JobComplete, "")), pods: []corev1.Pod{pod(nil)},
			want: PinOutcome{Done: images}, done: true},
		{name: "succeeded, an image absent", job: job(cond(batchv1.JobComplete, "")),
			pods: []corev1.Pod{reportPod(pin.Report{Absent: []string{"b:1"}}.Encode(), 0)},
			want: PinOutcome{Done: []string{"a:1", "c:1"}, Failed: map[string]string{}}, done: true},
		{name: "one failed", job: job(cond(batchv1.JobFailed, "BackoffLimitExceeded")),
			pods: []corev1.Pod{reportPod(pin.Report{Failed: map[string]string{"c:1": "rpc error"}}.Encode(), 1)},
			want: PinOutcome{Done: []string{"a:1", "b:1"}, Failed: map[string]string{"c:1": "rpc error"}}, done: true},
		{name: "runtime cannot pin", job: job(cond(batchv1.JobFailed, "BackoffLimitExceeded")),
			pods: []corev1.Pod{reportPod(pin.Report{Unsupported: "unknown service"}.Encode(), 1)},
			want: PinOutcome{Unsupported: "unknown service"}, done: true},
		{name: "report cut short", job: job(cond(batchv1.JobFailed, "BackoffLimitExceeded")),
			pods: []corev1.Pod{reportPod(pin.Report{Failed: map[string]string{"a:1": "x"}, Dropped: 1}.Encode(), 1)},
			want: PinOutcome{Failed: map[string]string{"a:1": "x", "b:1": "the helper's report was cut short; its result is unknown",
				"c:1": "the helper's report was cut short; its result is unknown"}}, done: true},
		{name: "failed with no report", job: job(cond(batchv1.JobFailed, "BackoffLimitExceeded")),
			pods: []corev1.Pod{reportPod("exec format error", 1)},
			want: PinOutcome{Failed: map[string]string{"a:1": "Error: exec format error", "b:1": "Error: exec format error",
				"c:1": "Error: exec format error"}}, done: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, done := Pin(tt.job, tt.pods, images)
			g.Expect(done).To(Equal(tt.done))
			g.Expect(got).To(Equal(tt.want))
		})
	}
	g := NewWithT(t)
	g.Expect(PinExpired("j", []string{"a:1"}).Failed).To(HaveKeyWithValue("a:1", ContainSubstring("deadline")))
}
