package results

import (
	"fmt"
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
		{name: "no pod, for the Job controller's create was refused", job: job(),
			events: []corev1.Event{
				{Type: "Warning", Reason: "FailedCreate", Message: `Error creating: pods "c-1-abcde" is forbidden: failed quota: q: must specify limits.cpu for: pull`, LastTimestamp: metav1.NewTime(time.Unix(1002, 0))},
				{Type: "Warning", Reason: "FailedCreate", Message: `Error creating: pods "c-1-zyxwv" is forbidden: failed quota: q: must specify limits.cpu for: pull`, LastTimestamp: metav1.NewTime(time.Unix(1001, 0))}},
			want: Outcome{State: Failed, Expired: true, Reason: "FailedCreate",
				Message: `No pods matched job c-1: Error creating: pods "c-1-abcde" is forbidden: failed quota: q: must specify limits.cpu for: pull`}},
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
		{name: "a registry still rate limiting at the deadline is told from a missing image", job: job(),
			pods: []corev1.Pod{waitingPod("ImagePullBackOff", `Back-off pulling image "r/a:1": ErrImagePull: unexpected status from HEAD request to https://r/v2/a/manifests/1: 429 Too Many Requests`)},
			want: Outcome{State: Failed, Expired: true, Reason: TransientReason,
				Message: `the registry kept failing with errors that may heal until the pull deadline; last: Back-off pulling image "r/a:1": ErrImagePull: unexpected status from HEAD request to https://r/v2/a/manifests/1: 429 Too Many Requests`}},
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
		unrun    Unrun
		purge    bool
		want     v1alpha2.ImageCacheActionStatus
		wantMsg  string
		failures map[string]v1alpha2.NodeReasonMessageList
	}{
		{name: "nothing to do", want: v1alpha2.ImageCacheActionStatusNoImagesPulledOrDeleted, wantMsg: v1alpha2.ImageCacheMessageNoImagesPulledOrDeleted},
		{name: "all pulled", items: []Item{{Image: "a", Node: "n1", Outcome: ok}}, want: v1alpha2.ImageCacheActionStatusSucceeded, wantMsg: v1alpha2.ImageCacheMessageImagesPulledSuccessfully},
		{name: "all already present: the original's alreadypulled is a success", unrun: Unrun{Present: 3}, want: v1alpha2.ImageCacheActionStatusSucceeded, wantMsg: v1alpha2.ImageCacheMessageImagesPulledSuccessfully},
		{name: "some present, some pulled", unrun: Unrun{Present: 1}, items: []Item{{Image: "a", Node: "n1", Outcome: ok}}, want: v1alpha2.ImageCacheActionStatusSucceeded, wantMsg: v1alpha2.ImageCacheMessageImagesPulledSuccessfully},
		{name: "present but another failed", unrun: Unrun{Present: 1}, items: []Item{{Image: "a", Node: "n1", Outcome: bad}}, want: v1alpha2.ImageCacheActionStatusFailed, wantMsg: v1alpha2.ImageCacheMessageImagePullFailedForSomeImages,
			failures: map[string]v1alpha2.NodeReasonMessageList{"a": {{Node: "n1", Reason: "ImagePullBackOff", Message: "nope"}}}},
		{name: "all deleted", purge: true, items: []Item{{Image: "a", Node: "n1", Outcome: ok}}, want: v1alpha2.ImageCacheActionStatusSucceeded, wantMsg: v1alpha2.ImageCacheMessageImagesDeletedSuccessfully},
		{name: "some failed, listed per image and node", items: []Item{{Image: "a", Node: "n2", Outcome: bad}, {Image: "a", Node: "n1", Outcome: bad}, {Image: "b", Node: "n1", Outcome: ok}},
			want: v1alpha2.ImageCacheActionStatusFailed, wantMsg: v1alpha2.ImageCacheMessageImagePullFailedForSomeImages,
			failures: map[string]v1alpha2.NodeReasonMessageList{"a": {{Node: "n1", Reason: "ImagePullBackOff", Message: "nope"}, {Node: "n2", Reason: "ImagePullBackOff", Message: "nope"}}}},
		{name: "every node that matched was left out, one without the image: nothing could be pulled, not 'no node matched'",
			unrun: Unrun{Skipped: 2, Lacking: map[string]string{"n1": v1alpha2.SkipCordoned}},
			want:  v1alpha2.ImageCacheActionStatusFailed, wantMsg: v1alpha2.ImageCacheMessageImagePullFailedForSomeImages},
		{name: "every node that matched was left out, each holding the images", unrun: Unrun{Skipped: 2},
			want: v1alpha2.ImageCacheActionStatusSucceeded, wantMsg: v1alpha2.ImageCacheMessageImagesPulledSuccessfully},
		{name: "a purge whose nodes cannot hold our images has nothing to delete", purge: true,
			unrun: Unrun{Skipped: 1, Lacking: map[string]string{"w": v1alpha2.SkipNotLinux}},
			want:  v1alpha2.ImageCacheActionStatusSucceeded, wantMsg: v1alpha2.ImageCacheMessageImagesDeletedSuccessfully},
		{name: "some pulled, a skipped node without the image: the pulls succeeded, Ready says the rest", unrun: Unrun{Skipped: 1, Lacking: map[string]string{"n2": v1alpha2.SkipNotReady}},
			items: []Item{{Image: "a", Node: "n1", Outcome: ok}}, want: v1alpha2.ImageCacheActionStatusSucceeded, wantMsg: v1alpha2.ImageCacheMessageImagesPulledSuccessfully},
		{name: "delete failed", purge: true, items: []Item{{Image: "a", Node: "n1", Outcome: bad}},
			want: v1alpha2.ImageCacheActionStatusFailed, wantMsg: v1alpha2.ImageCacheMessageImageDeleteFailedForSomeImages,
			failures: map[string]v1alpha2.NodeReasonMessageList{"a": {{Node: "n1", Reason: "ImagePullBackOff", Message: "nope"}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			s := Summarise(c.items, c.unrun, c.purge)
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

// Ready is True only when every node the lists select holds every image:
// neither a failure (those left out for size count) nor a node left out
// without an image may stand behind it.
func TestReady(t *testing.T) {
	const detail = "the operation's detail"
	many := map[string]string{}
	for i := range 12 {
		many[fmt.Sprintf("w%02d", i)] = v1alpha2.SkipNotLinux
	}
	cases := []struct {
		name    string
		status  v1alpha2.ImageCacheActionStatus
		failed  int
		lacking map[string]string
		want    Readiness
	}{
		{name: "succeeded", status: v1alpha2.ImageCacheActionStatusSucceeded,
			want: Readiness{metav1.ConditionTrue, string(v1alpha2.ImageCacheActionStatusSucceeded), detail}},
		{name: "no node matched: nothing is missing", status: v1alpha2.ImageCacheActionStatusNoImagesPulledOrDeleted,
			want: Readiness{metav1.ConditionTrue, string(v1alpha2.ImageCacheActionStatusNoImagesPulledOrDeleted), detail}},
		{name: "failed", status: v1alpha2.ImageCacheActionStatusFailed, failed: 1,
			want: Readiness{metav1.ConditionFalse, string(v1alpha2.ImageCacheActionStatusFailed), detail}},
		{name: "failed, and a node left out: the failure comes first", status: v1alpha2.ImageCacheActionStatusFailed, failed: 3,
			lacking: map[string]string{"a": v1alpha2.SkipCordoned},
			want:    Readiness{metav1.ConditionFalse, string(v1alpha2.ImageCacheActionStatusFailed), detail}},
		{name: "the pulls succeeded, but selected nodes were left out without the images", status: v1alpha2.ImageCacheActionStatusSucceeded,
			lacking: map[string]string{"b": v1alpha2.SkipNotReady, "a": v1alpha2.SkipCordoned, "c": v1alpha2.SkipCordoned},
			want: Readiness{metav1.ConditionFalse, v1alpha2.ReadyReasonNodesSkipped,
				"3 selected node(s) do not report every image and got no pull Job: 2 Cordoned (a, c); 1 NotReady (b)"}},
		{name: "every matched node left out", status: v1alpha2.ImageCacheActionStatusFailed,
			lacking: many,
			want: Readiness{metav1.ConditionFalse, v1alpha2.ReadyReasonNodesSkipped,
				"12 selected node(s) do not report every image and got no pull Job: 12 NotLinux (w00, w01, w02, w03, w04, w05, w06, w07, w08, w09 and 2 more)"}},
		{name: "aborted", status: v1alpha2.ImageCacheActionStatusAborted,
			want: Readiness{metav1.ConditionFalse, string(v1alpha2.ImageCacheActionStatusAborted), detail}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			NewWithT(t).Expect(Ready(c.status, c.failed, c.lacking, detail)).To(Equal(c.want))
		})
	}
}

// An operation keeps the earlier failures it did not retry: on a node it
// left out, of an image still wanted.
func TestCarry(t *testing.T) {
	old := func(node string) v1alpha2.NodeReasonMessage {
		return v1alpha2.NodeReasonMessage{Node: node, Reason: "ErrImagePull", Message: "before"}
	}
	fresh := func(node string) v1alpha2.NodeReasonMessage {
		return v1alpha2.NodeReasonMessage{Node: node, Reason: "ImagePullBackOff", Message: "now"}
	}
	before := map[string]v1alpha2.NodeReasonMessageList{
		"a:1":    {old("n1"), old("n2"), old("n3")},
		"gone:1": {old("n2")},
	}
	left := map[string]string{"n2": v1alpha2.SkipCordoned, "n3": v1alpha2.SkipNotReady}
	wanted := map[string]bool{"a:1": true, "b:1": true}
	cases := []struct {
		name string
		now  map[string]v1alpha2.NodeReasonMessageList
		want map[string]v1alpha2.NodeReasonMessageList
	}{
		{name: "the served node's failure goes with its retry; the left-out nodes' stay; an image no longer wanted goes",
			want: map[string]v1alpha2.NodeReasonMessageList{"a:1": {old("n2"), old("n3")}}},
		{name: "the operation's own failures are added, sorted by node",
			now:  map[string]v1alpha2.NodeReasonMessageList{"a:1": {fresh("n1")}, "b:1": {fresh("n4")}},
			want: map[string]v1alpha2.NodeReasonMessageList{"a:1": {fresh("n1"), old("n2"), old("n3")}, "b:1": {fresh("n4")}}},
		{name: "a failure found again replaces the earlier one",
			now:  map[string]v1alpha2.NodeReasonMessageList{"a:1": {fresh("n3")}},
			want: map[string]v1alpha2.NodeReasonMessageList{"a:1": {old("n2"), fresh("n3")}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			NewWithT(t).Expect(Carry(before, left, wanted, c.now)).To(Equal(c.want))
		})
	}
	NewWithT(t).Expect(Carry(nil, left, wanted, nil)).To(BeNil(), "nothing to report is no failures")
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
