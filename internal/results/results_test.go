package results

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
)

func job(conds ...batchv1.JobCondition) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "c-1"}, Status: batchv1.JobStatus{Conditions: conds}}
}

func cond(t batchv1.JobConditionType, reason string) batchv1.JobCondition {
	return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: reason + " message"}
}

func pod(mod func(*corev1.Pod)) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "c-1-abcde"}, Spec: corev1.PodSpec{NodeName: "n1"}}
	p.Status.Phase = corev1.PodPending
	if mod != nil {
		mod(&p)
	}
	return p
}

func waitingPod(reason, msg string) corev1.Pod {
	return pod(func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "pull", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}
	})
}

func TestFromJob(t *testing.T) {
	cases := []struct {
		name string
		job  *batchv1.Job
		pods []corev1.Pod
		want Outcome
	}{
		{name: "no condition is pending", job: job(), want: Outcome{State: Pending}},
		{name: "complete", job: job(cond(batchv1.JobComplete, "")), want: Outcome{State: Succeeded}},
		{name: "success criteria met is not complete yet", job: job(cond(batchv1.JobSuccessCriteriaMet, "")), want: Outcome{State: Pending}},
		{name: "failure target is not failed yet", job: job(cond(batchv1.JobFailureTarget, "")), want: Outcome{State: Pending}},
		{name: "failed without pods uses the condition", job: job(cond(batchv1.JobFailed, "DeadlineExceeded")),
			want: Outcome{State: Failed, Reason: "DeadlineExceeded", Message: "DeadlineExceeded message"}},
		{name: "failed with a terminated container uses its message", job: job(cond(batchv1.JobFailed, "BackoffLimitExceeded")),
			pods: []corev1.Pod{pod(func(p *corev1.Pod) {
				p.Status.Phase = corev1.PodFailed
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "delete", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "rpc error: image in use\n"}}}}
			})},
			want: Outcome{State: Failed, Reason: "Error", Message: "rpc error: image in use"}},
		{name: "a failed pod with only a phase reason", job: job(cond(batchv1.JobFailed, "BackoffLimitExceeded")),
			pods: []corev1.Pod{pod(func(p *corev1.Pod) {
				p.Status.Phase = corev1.PodFailed
				p.Status.Reason = "Evicted"
				p.Status.Message = "disk pressure"
			})},
			want: Outcome{State: Failed, Reason: "Evicted", Message: "disk pressure"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(FromJob(c.job, c.pods)).To(Equal(c.want))
		})
	}
}

func TestAtDeadline(t *testing.T) {
	ev := func(typ, msg string, at time.Duration) corev1.Event {
		return corev1.Event{Type: typ, Message: msg, LastTimestamp: metav1.NewTime(time.Unix(1000, 0).Add(at))}
	}
	cases := []struct {
		name    string
		job     *batchv1.Job
		pods    []corev1.Pod
		events  []corev1.Event
		want    Outcome
		wantMsg string
	}{
		{name: "finished jobs are not expired", job: job(cond(batchv1.JobComplete, "")), want: Outcome{State: Succeeded}},
		{name: "no pod", job: job(), want: Outcome{State: Failed, Expired: true, Reason: "NoPod", Message: "No pods matched job c-1"}},
		{name: "image pull back-off carries the registry's error from events", job: job(),
			pods:    []corev1.Pod{waitingPod("ImagePullBackOff", `Back-off pulling image "x.invalid/a:1"`)},
			events:  []corev1.Event{ev("Warning", `Failed to pull image "x.invalid/a:1": not found`, 2), ev("Normal", "Pulling image", 1), ev("Warning", `Back-off pulling image "x.invalid/a:1"`, 3)},
			want:    Outcome{State: Failed, Expired: true, Reason: "ImagePullBackOff"},
			wantMsg: `Back-off pulling image "x.invalid/a:1": Failed to pull image "x.invalid/a:1": not found`},
		{name: "the runtime's error once, with the kubelet's words around it, and no bare state", job: job(),
			pods: []corev1.Pod{waitingPod("ErrImagePull", `rpc error: code = NotFound desc = r/a:1: not found`)},
			events: []corev1.Event{
				ev("Warning", `Failed to pull image "r/a:1": rpc error: code = NotFound desc = r/a:1: not found`, 1),
				ev("Warning", "Error: ErrImagePull", 2), ev("Warning", "Error: ImagePullBackOff", 4),
				ev("Warning", `Error: configmap "c" not found`, 5)},
			want: Outcome{State: Failed, Expired: true, Reason: "ErrImagePull",
				Message: `Failed to pull image "r/a:1": rpc error: code = NotFound desc = r/a:1: not found: Error: configmap "c" not found`}},
		{name: "in back-off the kubelet's waiting message holds the runtime's error already", job: job(),
			pods: []corev1.Pod{waitingPod("ImagePullBackOff", `Back-off pulling image "r/a:1": ErrImagePull: rpc error: code = NotFound desc = r/a:1: not found`)},
			events: []corev1.Event{
				ev("Warning", `Failed to pull image "r/a:1": rpc error: code = NotFound desc = r/a:1: not found`, 1),
				ev("Warning", "Error: ErrImagePull", 2), ev("Warning", "Error: ImagePullBackOff", 4)},
			want: Outcome{State: Failed, Expired: true, Reason: "ImagePullBackOff",
				Message: `Back-off pulling image "r/a:1": ErrImagePull: rpc error: code = NotFound desc = r/a:1: not found`}},
		{name: "pending without statuses points at the node", job: job(), pods: []corev1.Pod{pod(nil)},
			want: Outcome{State: Failed, Expired: true, Reason: "Pending"}, wantMsg: "Pod c-1-abcde is still pending: check if node n1 is ready"},
		{name: "container creating explains nothing; the phase does", job: job(), pods: []corev1.Pod{waitingPod("ContainerCreating", "")},
			want: Outcome{State: Failed, Expired: true, Reason: "Pending"}, wantMsg: "check if node n1 is ready"},
		{name: "a pod that succeeded before the Job controller saw it", job: job(), pods: []corev1.Pod{
			pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }),
			pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
		}, want: Outcome{State: Succeeded}},
		{name: "running at the deadline", job: job(), pods: []corev1.Pod{pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning })},
			want: Outcome{State: Failed, Expired: true, Reason: "Running"}, wantMsg: "still running"},
		{name: "the newest of several pods tells the story", job: job(), pods: []corev1.Pod{
			pod(func(p *corev1.Pod) {
				p.Status.Phase = corev1.PodRunning
				p.CreationTimestamp = metav1.NewTime(time.Unix(1, 0))
			}),
			func() corev1.Pod {
				p := waitingPod("ErrImagePull", "denied")
				p.CreationTimestamp = metav1.NewTime(time.Unix(2, 0))
				return p
			}(),
		}, want: Outcome{State: Failed, Expired: true, Reason: "ErrImagePull"}, wantMsg: "denied"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			got := AtDeadline(c.job, c.pods, c.events)
			if c.wantMsg != "" {
				g.Expect(got.Message).To(ContainSubstring(c.wantMsg))
				got.Message = ""
			}
			g.Expect(got).To(Equal(c.want))
		})
	}
}

func TestMessagesAreBounded(t *testing.T) {
	g := NewWithT(t)
	huge := strings.Repeat("<html>", 1000)
	got := AtDeadline(job(), []corev1.Pod{waitingPod("ErrImagePull", huge)}, nil)
	g.Expect(len(got.Message)).To(BeNumerically("<=", MaxMessage))
}

func TestSummarise(t *testing.T) {
	ok := Outcome{State: Succeeded}
	bad := Outcome{State: Failed, Reason: "ImagePullBackOff", Message: "nope"}
	cases := []struct {
		name     string
		items    []Item
		present  int
		purge    bool
		want     v1alpha2.ImageCacheActionStatus
		wantMsg  string
		failures map[string]v1alpha2.NodeReasonMessageList
	}{
		{name: "nothing to do", want: v1alpha2.ImageCacheActionStatusNoImagesPulledOrDeleted, wantMsg: v1alpha2.ImageCacheMessageNoImagesPulledOrDeleted},
		{name: "all pulled", items: []Item{{Image: "a", Node: "n1", Outcome: ok}}, want: v1alpha2.ImageCacheActionStatusSucceeded, wantMsg: v1alpha2.ImageCacheMessageImagesPulledSuccessfully},
		{name: "all already present: the original's alreadypulled is a success", present: 3, want: v1alpha2.ImageCacheActionStatusSucceeded, wantMsg: v1alpha2.ImageCacheMessageImagesPulledSuccessfully},
		{name: "some present, some pulled", present: 1, items: []Item{{Image: "a", Node: "n1", Outcome: ok}}, want: v1alpha2.ImageCacheActionStatusSucceeded, wantMsg: v1alpha2.ImageCacheMessageImagesPulledSuccessfully},
		{name: "present but another failed", present: 1, items: []Item{{Image: "a", Node: "n1", Outcome: bad}}, want: v1alpha2.ImageCacheActionStatusFailed, wantMsg: v1alpha2.ImageCacheMessageImagePullFailedForSomeImages,
			failures: map[string]v1alpha2.NodeReasonMessageList{"a": {{Node: "n1", Reason: "ImagePullBackOff", Message: "nope"}}}},
		{name: "all deleted", purge: true, items: []Item{{Image: "a", Node: "n1", Outcome: ok}}, want: v1alpha2.ImageCacheActionStatusSucceeded, wantMsg: v1alpha2.ImageCacheMessageImagesDeletedSuccessfully},
		{name: "some failed, listed per image and node", items: []Item{{Image: "a", Node: "n2", Outcome: bad}, {Image: "a", Node: "n1", Outcome: bad}, {Image: "b", Node: "n1", Outcome: ok}},
			want: v1alpha2.ImageCacheActionStatusFailed, wantMsg: v1alpha2.ImageCacheMessageImagePullFailedForSomeImages,
			failures: map[string]v1alpha2.NodeReasonMessageList{"a": {{Node: "n1", Reason: "ImagePullBackOff", Message: "nope"}, {Node: "n2", Reason: "ImagePullBackOff", Message: "nope"}}}},
		{name: "delete failed", purge: true, items: []Item{{Image: "a", Node: "n1", Outcome: bad}},
			want: v1alpha2.ImageCacheActionStatusFailed, wantMsg: v1alpha2.ImageCacheMessageImageDeleteFailedForSomeImages,
			failures: map[string]v1alpha2.NodeReasonMessageList{"a": {{Node: "n1", Reason: "ImagePullBackOff", Message: "nope"}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			s := Summarise(c.items, c.present, c.purge)
			g.Expect(s.Status).To(Equal(c.want))
			g.Expect(s.Message).To(Equal(c.wantMsg))
			if c.failures == nil {
				g.Expect(s.Failures).To(BeEmpty())
			} else {
				g.Expect(s.Failures).To(Equal(c.failures))
			}
		})
	}
}

// FuzzAtDeadline settles arbitrary pod states: it must never panic, and an
// unfinished Job always ends Failed with a reason.
func FuzzAtDeadline(f *testing.F) {
	f.Add("ImagePullBackOff", "msg", "Pending", int32(0), true)
	f.Add("", "", "Running", int32(1), false)
	f.Add("ContainerCreating", "x", "", int32(137), true)
	f.Fuzz(func(t *testing.T, reason, msg, phase string, exit int32, terminated bool) {
		p := waitingPod(reason, msg)
		p.Status.Phase = corev1.PodPhase(phase)
		if terminated {
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Message: msg}}
		}
		o := AtDeadline(job(), []corev1.Pod{p}, []corev1.Event{{Type: "Warning", Message: msg}})
		if o.State != Failed || o.Reason == "" || len(o.Message) > MaxMessage {
			t.Fatalf("unsettled or unbounded outcome %+v", o)
		}
	})
}
