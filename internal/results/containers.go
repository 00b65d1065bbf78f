package results

import (
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// Containers settles the pull containers of a node Job, one Outcome per
// name in containers, in order; Pending where nothing is known yet. A
// container that exited 0 pulled its image; one the kubelet cannot pull
// the image of fails with the kubelet's message; one that exited otherwise
// fails with its termination. What the pod as a whole says (its helper
// could not be installed, it was evicted, the Job failed) settles every
// container still open. A pull error that may heal (ClassifyPull) leaves
// its container open: the kubelet tries again. expired says the Job reached
// its pull deadline: what is still open then fails with its last state and
// the Warning events of the pod and of that container.
func Containers(job *batchv1.Job, pods []corev1.Pod, containers []string, expired bool, events []corev1.Event) []Outcome {
	out := make([]Outcome, len(containers))
	for i, name := range containers {
		o := container(job, pods, name, expired, events)
		o.Message = truncate(o.Message, MaxMessage)
		out[i] = o
	}
	return out
}

func container(job *batchv1.Job, pods []corev1.Pod, name string, expired bool, events []corev1.Event) Outcome {
	jobDone := fromJob(job, nil)
	if jobDone.State == Succeeded {
		return jobDone
	}
	pod := newest(pods)
	if pod == nil {
		switch {
		case jobDone.State == Failed:
			return jobDone
		case expired:
			return noPod(job, events)
		}
		return Outcome{State: Pending}
	}
	if pod.Status.Phase == corev1.PodSucceeded {
		return Outcome{State: Succeeded}
	}
	var cs *corev1.ContainerStatus
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == name {
			cs = &pod.Status.ContainerStatuses[i]
		}
	}
	if cs != nil {
		if t := cs.State.Terminated; t != nil {
			if t.ExitCode == 0 {
				return Outcome{State: Succeeded}
			}
			return Outcome{State: Failed, Reason: nonEmpty(t.Reason, "Error"),
				Message: nonEmpty(strings.TrimSpace(t.Message), fmt.Sprintf("container %s exited with code %d", name, t.ExitCode))}
		}
		if o, ok := pullWait(cs.State.Waiting, fmt.Sprintf("container %s of pod %s", name, pod.Name), expired, warningsIf(expired, eventsOf(events, name))); ok {
			return o
		}
	}
	if o, ok := podFailure(pod, expired, events); ok {
		return o
	}
	if jobDone.State == Failed {
		return jobDone
	}
	if !expired {
		return Outcome{State: Pending}
	}
	o := Outcome{State: Failed, Expired: true}
	mine := eventsOf(events, name)
	switch {
	case cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason != "" &&
		cs.State.Waiting.Reason != "ContainerCreating" && cs.State.Waiting.Reason != "PodInitializing":
		o.Reason = cs.State.Waiting.Reason
		o.Message = joinMessages(cs.State.Waiting.Message, warnings(mine))
	case cs != nil && cs.State.Running != nil:
		o.Reason = "Running"
		o.Message = fmt.Sprintf("container %s of pod %s was still running at the deadline", name, pod.Name)
	default:
		o.Reason = "Pending"
		node := pod.Spec.NodeName
		if node == "" {
			node = "(not scheduled)"
		}
		o.Message = joinMessages(fmt.Sprintf("Pod %s is still pending: check if node %s is ready", pod.Name, node), warnings(mine))
	}
	return o
}

// podFailure is what settles every open container of a pod: its helper
// init container failed or cannot be pulled, or the pod itself failed. A
// helper whose pull may heal holds them all Pending until expired.
func podFailure(pod *corev1.Pod, expired bool, events []corev1.Event) (Outcome, bool) {
	for _, cs := range pod.Status.InitContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return Outcome{State: Failed, Reason: nonEmpty(t.Reason, "Error"),
				Message: nonEmpty(strings.TrimSpace(t.Message), fmt.Sprintf("init container %s exited with code %d", cs.Name, t.ExitCode))}, true
		}
		if o, ok := pullWait(cs.State.Waiting, fmt.Sprintf("init container %s of pod %s", cs.Name, pod.Name), expired, warningsIf(expired, eventsOf(events, cs.Name))); ok {
			return o, true
		}
	}
	if pod.Status.Phase == corev1.PodFailed {
		return Outcome{State: Failed, Reason: nonEmpty(pod.Status.Reason, "Failed"),
			Message: nonEmpty(pod.Status.Message, fmt.Sprintf("Pod %s failed", pod.Name))}, true
	}
	return Outcome{}, false
}

// warningsIf is warnings(events) when they are wanted: only a failure at
// the deadline carries the events.
func warningsIf(want bool, events []corev1.Event) []string {
	if !want {
		return nil
	}
	return warnings(events)
}

// eventsOf keeps the events about the pod as a whole and about container
// name: another container's pull error says nothing of this one.
func eventsOf(events []corev1.Event, name string) []corev1.Event {
	var out []corev1.Event
	for _, e := range events {
		fp := e.InvolvedObject.FieldPath
		if fp == "" || strings.HasPrefix(fp, "spec.initContainers") || fp == "spec.containers{"+name+"}" {
			out = append(out, e)
		}
	}
	return out
}
