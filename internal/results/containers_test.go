package results

import (
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

func TestContainers(t *testing.T) {
	done := func(code int32, reason, msg string) corev1.ContainerState {
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, Message: msg}}
	}
	wait := func(reason, msg string) corev1.ContainerState {
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
	}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	// states gives the pod the states of pull-0, pull-1 and pull-2.
	states := func(phase corev1.PodPhase, s ...corev1.ContainerState) []corev1.Pod {
		return []corev1.Pod{pod(func(p *corev1.Pod) {
			p.Status.Phase = phase
			for i, st := range s {
				p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: []string{"pull-0", "pull-1", "pull-2"}[i], State: st})
			}
		})}
	}
	notFound := `failed to pull and unpack image "reg/missing:1": not found`
	tooMany := `failed to pull and unpack image "reg/busy:1": failed to resolve reference "reg/busy:1": unexpected status from HEAD request to https://reg/v2/busy/manifests/1: 429 Too Many Requests`
	unavailable := `failed to pull and unpack image "reg/busy:1": unexpected status from GET request to https://reg/v2/busy/blobs/sha256:ab: 503 Service Unavailable`
	pulled := Outcome{State: Succeeded}
	pending := Outcome{State: Pending}
	cases := []struct {
		name    string
		job     *batchv1.Job
		pods    []corev1.Pod
		expired bool
		events  []corev1.Event
		want    []Outcome
	}{
		{name: "a complete Job pulled every image", job: job(cond(batchv1.JobComplete, "")), want: []Outcome{pulled, pulled, pulled}},
		{name: "no pod yet is pending", job: job(), want: []Outcome{pending, pending, pending}},
		{name: "no pod at the deadline", job: job(), expired: true,
			want: []Outcome{
				{State: Failed, Expired: true, Reason: "NoPod", Message: "No pods matched job c-1"},
				{State: Failed, Expired: true, Reason: "NoPod", Message: "No pods matched job c-1"},
				{State: Failed, Expired: true, Reason: "NoPod", Message: "No pods matched job c-1"}}},
		{name: "no pod at the deadline, for its create was refused", job: job(), expired: true,
			events: []corev1.Event{{Type: "Warning", Reason: "FailedCreate", Message: `Error creating: pods "c-1-x" is forbidden: maximum cpu usage per Container is 1`}},
			want: []Outcome{
				{State: Failed, Expired: true, Reason: "FailedCreate", Message: `No pods matched job c-1: Error creating: pods "c-1-x" is forbidden: maximum cpu usage per Container is 1`},
				{State: Failed, Expired: true, Reason: "FailedCreate", Message: `No pods matched job c-1: Error creating: pods "c-1-x" is forbidden: maximum cpu usage per Container is 1`},
				{State: Failed, Expired: true, Reason: "FailedCreate", Message: `No pods matched job c-1: Error creating: pods "c-1-x" is forbidden: maximum cpu usage per Container is 1`}}},
		{name: "each container settles on its own", job: job(),
			pods: states(corev1.PodRunning, done(0, "Completed", ""), wait("ErrImagePull", notFound), running),
			want: []Outcome{pulled, {State: Failed, Reason: "ErrImagePull", Message: notFound}, pending}},
		{name: "a back-off naming its error and an invalid name fail too", job: job(),
			pods: states(corev1.PodPending, wait("ImagePullBackOff", `Back-off pulling image "reg/missing:1": ErrImagePull: `+notFound), wait("InvalidImageName", "bad"), wait("ContainerCreating", "")),
			want: []Outcome{{State: Failed, Reason: "ImagePullBackOff", Message: `Back-off pulling image "reg/missing:1": ErrImagePull: ` + notFound},
				{State: Failed, Reason: "InvalidImageName", Message: "bad"}, pending}},
		{name: "a rate limit, a 503 and a back-off that names no error wait for the kubelet's next attempt", job: job(),
			pods: states(corev1.PodPending, wait("ErrImagePull", tooMany), wait("ImagePullBackOff", `Back-off pulling image "reg/busy:1": ErrImagePull: `+unavailable),
				wait("ImagePullBackOff", `Back-off pulling image "reg/missing:1"`)),
			want: []Outcome{pending, pending, pending}},
		{name: "at the deadline a pull still failing transiently says so, with its last error", job: job(), expired: true,
			pods: states(corev1.PodPending, wait("ErrImagePull", tooMany), done(0, "Completed", ""), done(0, "Completed", "")),
			want: []Outcome{{State: Failed, Expired: true, Reason: TransientReason,
				Message: "the registry kept failing with errors that may heal until the pull deadline; last: " + tooMany}, pulled, pulled}},
		{name: "at the deadline a back-off that names no error is explained by its events", job: job(), expired: true,
			pods: states(corev1.PodPending, wait("ImagePullBackOff", `Back-off pulling image "reg/missing:1"`), done(0, "", ""), done(0, "", "")),
			events: []corev1.Event{{Type: corev1.EventTypeWarning, Message: `Failed to pull image "reg/missing:1": ` + notFound,
				InvolvedObject: corev1.ObjectReference{FieldPath: "spec.containers{pull-0}"}}},
			want: []Outcome{{State: Failed, Expired: true, Reason: "ImagePullBackOff",
				Message: `Back-off pulling image "reg/missing:1": Failed to pull image "reg/missing:1": ` + notFound}, pulled, pulled}},
		{name: "a helper whose pull may heal holds every container", job: job(),
			pods: []corev1.Pod{pod(func(p *corev1.Pod) {
				p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "install-helper", State: wait("ErrImagePull", tooMany)}}
			})},
			want: []Outcome{pending, pending, pending}},
		{name: "a container that exits non-zero fails with its message", job: job(),
			pods: states(corev1.PodRunning, done(1, "Error", "exec format error\n"), done(0, "Completed", "")),
			want: []Outcome{{State: Failed, Reason: "Error", Message: "exec format error"}, pulled, pending}},
		{name: "a pod that succeeded pulled every image", job: job(), pods: states(corev1.PodSucceeded),
			want: []Outcome{pulled, pulled, pulled}},
		{name: "a helper that cannot be pulled fails every open container", job: job(),
			pods: []corev1.Pod{pod(func(p *corev1.Pod) {
				p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "install-helper", State: wait("ErrImagePull", "helper not found")}}
			})},
			want: []Outcome{{State: Failed, Reason: "ErrImagePull", Message: "helper not found"},
				{State: Failed, Reason: "ErrImagePull", Message: "helper not found"},
				{State: Failed, Reason: "ErrImagePull", Message: "helper not found"}}},
		{name: "a Job failed at its active deadline keeps what was pulled", job: job(cond(batchv1.JobFailed, "DeadlineExceeded")),
			pods: states(corev1.PodRunning, done(0, "Completed", ""), running),
			want: []Outcome{pulled, {State: Failed, Reason: "DeadlineExceeded", Message: "DeadlineExceeded message"},
				{State: Failed, Reason: "DeadlineExceeded", Message: "DeadlineExceeded message"}}},
		{name: "an evicted pod fails what it had not done", job: job(),
			pods: []corev1.Pod{pod(func(p *corev1.Pod) {
				p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "Evicted", "disk pressure"
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "pull-1", State: done(0, "Completed", "")}}
			})},
			want: []Outcome{{State: Failed, Reason: "Evicted", Message: "disk pressure"}, pulled, {State: Failed, Reason: "Evicted", Message: "disk pressure"}}},
		{name: "at the deadline each open container fails with its own state and events", job: job(), expired: true,
			pods: states(corev1.PodRunning, done(0, "Completed", ""), wait("ContainerCreating", ""), running),
			events: []corev1.Event{
				{Type: corev1.EventTypeWarning, Message: "disk slow", InvolvedObject: corev1.ObjectReference{FieldPath: "spec.containers{pull-1}"}},
				{Type: corev1.EventTypeWarning, Message: "not mine", InvolvedObject: corev1.ObjectReference{FieldPath: "spec.containers{pull-2}"}},
			},
			want: []Outcome{pulled,
				{State: Failed, Expired: true, Reason: "Pending", Message: "Pod c-1-abcde is still pending: check if node n1 is ready: disk slow"},
				{State: Failed, Expired: true, Reason: "Running", Message: "container pull-2 of pod c-1-abcde was still running at the deadline"}}},
		{name: "a waiting reason other than a pull error explains the deadline", job: job(), expired: true,
			pods: states(corev1.PodPending, wait("CreateContainerError", "no space left"), done(0, "", ""), done(0, "", "")),
			want: []Outcome{{State: Failed, Expired: true, Reason: "CreateContainerError", Message: "no space left"}, pulled, pulled}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(Containers(c.job, c.pods, []string{"pull-0", "pull-1", "pull-2"}, c.expired, c.events)).To(Equal(c.want))
		})
	}
}
