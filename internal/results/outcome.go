// Package results settles what happened to each Job of an operation and
// turns the outcomes into the cache's final status. It is pure: it reads Job,
// Pod and Event objects handed to it and never calls the API.
package results

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubefledged/kube-fledged/internal/jobs"
)

// State of one work item.
type State int

const (
	Pending State = iota
	Succeeded
	Failed
)

// Outcome is the settled result of one Job.
type Outcome struct {
	State   State
	Reason  string
	Message string
	// Expired marks a Job settled at the deadline while still unfinished.
	Expired bool
}

// FromJob settles a Job from its own status: Complete means the image is on
// (or off) the node; Failed takes the reason from its pod when one says more.
// A Job with neither condition is Pending, however many pods it has made.
// The interim SuccessCriteriaMet and FailureTarget conditions do not count:
// until Complete or Failed the Job still runs pods, and so still holds its
// pacing slot.
func FromJob(job *batchv1.Job, pods []corev1.Pod) Outcome {
	o := fromJob(job, pods)
	o.Message = truncate(o.Message, MaxMessage)
	return o
}

func fromJob(job *batchv1.Job, pods []corev1.Pod) Outcome {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return Outcome{State: Succeeded}
		case batchv1.JobFailed:
			if o, ok := fromPods(pods); ok {
				return o
			}
			return Outcome{State: Failed, Reason: nonEmpty(c.Reason, "JobFailed"), Message: nonEmpty(c.Message, "job "+job.Name+" failed")}
		}
	}
	return Outcome{State: Pending}
}

// AtDeadline settles a Job still unfinished when the operation's deadline
// passes, from what its pod is waiting for: a pull error that may have
// healed (TransientReason with the registry's last error), a pod stuck
// Pending on a node that is not ready, or no pod at all. events are the
// pod's events (only Warnings are read).
func AtDeadline(job *batchv1.Job, pods []corev1.Pod, events []corev1.Event) Outcome {
	o := atDeadline(job, pods, events)
	o.Message = truncate(o.Message, MaxMessage)
	return o
}

func atDeadline(job *batchv1.Job, pods []corev1.Pod, events []corev1.Event) Outcome {
	if o := FromJob(job, pods); o.State != Pending {
		return o
	}
	// A pod that succeeded did the work: the image is on (or off) the node,
	// and only the Job controller has not said so yet. On a loaded control
	// plane that lag can outlast the deadline; calling it a failure was the
	// original's fast-pod defect in another guise.
	for i := range pods {
		if pods[i].Status.Phase == corev1.PodSucceeded {
			return Outcome{State: Succeeded}
		}
	}
	o := Outcome{State: Failed, Expired: true}
	pod := newest(pods)
	if pod == nil {
		return noPod(job, events)
	}
	if w, ok := waiting(pod); ok {
		if pw, ok := pullWait(w, "Pod "+pod.Name, true, warnings(events)); ok {
			return pw
		}
		o.Reason = w.Reason
		o.Message = joinMessages(w.Message, warnings(events))
		return o
	}
	switch pod.Status.Phase {
	case corev1.PodPending, "":
		o.Reason = "Pending"
		node := pod.Spec.NodeName
		if node == "" {
			node = "(not scheduled)"
		}
		o.Message = joinMessages(fmt.Sprintf("Pod %s is still pending: check if node %s is ready", pod.Name, node), warnings(events))
	case corev1.PodRunning:
		o.Reason = "Running"
		o.Message = fmt.Sprintf("Pod %s was still running at the deadline", pod.Name)
	default:
		o.Reason = string(pod.Status.Phase)
		o.Message = fmt.Sprintf("Pod %s is %s", pod.Name, pod.Status.Phase)
	}
	return o
}

// BeforeDeadline settles a Job per (image, node) that has not finished and
// whose deadline has not passed, from its pods: Failed with the kubelet's
// reason and message when the image cannot be pulled for good (not found,
// denied, an invalid name: ClassifyPull), so that the pair fails at once as
// in a node Job; Pending while the pull runs or fails in a way that may heal,
// since the kubelet tries again with its back-off.
func BeforeDeadline(pods []corev1.Pod) Outcome {
	pod := newest(pods)
	if pod == nil {
		return Outcome{State: Pending}
	}
	for _, cs := range allStatuses(pod) {
		if o, ok := pullWait(cs.State.Waiting, "Pod "+pod.Name, false, nil); ok && o.State == Failed {
			o.Message = truncate(o.Message, MaxMessage)
			return o
		}
	}
	return Outcome{State: Pending}
}

// PullFailing says whether a container of pod waits with a pull error: the
// pod updates a Job per (image, node) must be settled on before its Job
// says anything.
func PullFailing(pod *corev1.Pod) bool {
	for _, cs := range allStatuses(pod) {
		if w := cs.State.Waiting; w != nil {
			if _, ok := ClassifyPull(w.Reason, w.Message); ok {
				return true
			}
		}
	}
	return false
}

// fromPods reads a terminal failure from the Job's pods: the terminated or
// waiting state of the container that failed, with the termination message
// our helpers write (the CRI runtime's answer for a delete).
func fromPods(pods []corev1.Pod) (Outcome, bool) {
	pod := newest(pods)
	if pod == nil {
		return Outcome{}, false
	}
	for _, cs := range allStatuses(pod) {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return Outcome{State: Failed, Reason: nonEmpty(t.Reason, "Error"), Message: nonEmpty(strings.TrimSpace(t.Message), fmt.Sprintf("container %s exited with code %d", cs.Name, t.ExitCode))}, true
		}
	}
	if w, ok := waiting(pod); ok {
		return Outcome{State: Failed, Reason: w.Reason, Message: nonEmpty(w.Message, fmt.Sprintf("Pod %s is waiting: %s", pod.Name, w.Reason))}, true
	}
	if pod.Status.Reason != "" {
		return Outcome{State: Failed, Reason: pod.Status.Reason, Message: nonEmpty(pod.Status.Message, fmt.Sprintf("Pod %s: %s", pod.Name, pod.Status.Reason))}, true
	}
	return Outcome{}, false
}

// waiting returns the first waiting state that explains a stuck pod; the
// routine ContainerCreating and PodInitializing states explain nothing.
func waiting(pod *corev1.Pod) (*corev1.ContainerStateWaiting, bool) {
	for _, cs := range allStatuses(pod) {
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
			return w, true
		}
	}
	return nil, false
}

func allStatuses(pod *corev1.Pod) []corev1.ContainerStatus {
	out := append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...)
	return append(out, pod.Status.ContainerStatuses...)
}

// newest picks the latest pod: with backoffLimit 0 there is normally one, but
// a pod deleted by someone is replaced, and the replacement tells the story.
func newest(pods []corev1.Pod) *corev1.Pod {
	var best *corev1.Pod
	for i := range pods {
		p := &pods[i]
		if best == nil || best.CreationTimestamp.Before(&p.CreationTimestamp) {
			best = p
		}
	}
	return best
}

// noPod settles a Job that reached its deadline with no pod. events are
// then the Job's own: the Job controller's FailedCreate warnings carry why
// the API server refused its pods (a ResourceQuota or LimitRange that
// demands limits, a policy), which is the user's fix, so the newest is the
// failure's reason and message. The older ones say the same of other pod
// names, one event each, and would only repeat it.
func noPod(job *batchv1.Job, events []corev1.Event) Outcome {
	o := Outcome{State: Failed, Expired: true, Reason: "NoPod", Message: fmt.Sprintf("No pods matched job %s", job.Name)}
	if w := warnings(events); len(w) > 0 {
		o.Message = joinMessages(o.Message, w[len(w)-1:])
	}
	for _, e := range events {
		if e.Type == corev1.EventTypeWarning && e.Reason == "FailedCreate" {
			o.Reason = e.Reason
			break
		}
	}
	return o
}

func warnings(events []corev1.Event) []string {
	sorted := append([]corev1.Event{}, events...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].LastTimestamp.Before(&sorted[j].LastTimestamp) })
	var out []string
	for _, e := range sorted {
		if e.Type == corev1.EventTypeWarning && e.Message != "" {
			out = append(out, e.Message)
		}
	}
	return out
}

// joinMessages puts the main message first and adds the event messages that
// say something new, so that the registry's error appears once. The kubelet
// writes the runtime's error into several texts: "Failed to pull image X:
// <error>" (an event), "<error>" (waiting in ErrImagePull), "Back-off
// pulling image X: ErrImagePull: <error>" (waiting in ImagePullBackOff). An
// event that holds a part with more around it takes that part's place; one
// whose error, after the image it names, a part holds already is left out;
// so is the kubelet's bare "Error: ErrImagePull", which names only the state
// the failure's reason gives.
func joinMessages(main string, more []string) string {
	parts := []string{}
	if main != "" {
		parts = append(parts, main)
	}
	for _, m := range more {
		if bareState.MatchString(m) {
			continue
		}
		_, said, quoted := strings.Cut(m, `": `)
		if !quoted {
			said = m
		}
		known := false
		for i, p := range parts {
			if strings.Contains(m, p) {
				parts[i], known = m, true
				break
			}
			if strings.Contains(p, said) {
				known = true
				break
			}
		}
		if !known {
			parts = append(parts, m)
		}
	}
	return truncate(strings.Join(parts, ": "), MaxMessage)
}

// bareState is a kubelet event that names a container's waiting reason and
// nothing else.
var bareState = regexp.MustCompile(`^Error: [A-Za-z]+$`)

// MaxMessage bounds one failure message: a registry can answer with a whole
// HTML page, and status objects must stay small.
const MaxMessage = 1024

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Deleted reads what a delete Job that succeeded (o) did: when its helper
// kept the image on the node (a container there uses it, or it is pinned),
// the outcome stays Succeeded with the helper's reason and message, which
// Summarise lists in status.kept. A pod without that report removed the
// image, or had none to remove (and a kwok node's pods run no helper).
func Deleted(o Outcome, pods []corev1.Pod) Outcome {
	pod := newest(pods)
	if o.State != Succeeded || pod == nil {
		return o
	}
	for _, cs := range allStatuses(pod) {
		if t := cs.State.Terminated; t != nil && t.ExitCode == 0 {
			if reason, msg, ok := jobs.ParseKept(t.Message); ok {
				return Outcome{State: Succeeded, Reason: reason, Message: truncate(msg, MaxMessage)}
			}
		}
	}
	return o
}
