package results

import (
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubefledged/kube-fledged/internal/pin"
)

// PinOutcome is what one pin (or unpin) Job did on its node.
type PinOutcome struct {
	// Done are the images pinned (unpinned) there.
	Done []string
	// Failed maps an image to why it was not; Absent ones are in neither:
	// the node no longer holds them, and there is nothing to pin.
	Failed map[string]string
	// Unsupported says why the node's runtime cannot pin at all.
	Unsupported string
}

// Pin settles a pin or unpin Job given images from its status and the
// report its helper left in the termination message (pin.Report). It
// returns false while the Job runs.
//
// A Job that succeeded without a report did every image: the helper always
// writes one, so only a node that runs no helper at all (kwok's, which
// completes pods as they start) gets here, and that is what such a node
// would report. A failed Job without a readable report failed every image,
// with what its pod says.
func Pin(job *batchv1.Job, pods []corev1.Pod, images []string) (PinOutcome, bool) {
	o := FromJob(job, pods)
	if o.State == Pending {
		return PinOutcome{}, false
	}
	report, ok := pinReport(pods)
	switch {
	case ok:
		return fromReport(report, images), true
	case o.State == Succeeded:
		return PinOutcome{Done: images}, true
	}
	failed := make(map[string]string, len(images))
	for _, img := range images {
		failed[img] = truncate(o.Reason+": "+o.Message, MaxMessage)
	}
	return PinOutcome{Failed: failed}, true
}

// PinExpired settles a pin Job that reached its deadline unfinished.
func PinExpired(job string, images []string) PinOutcome {
	failed := make(map[string]string, len(images))
	for _, img := range images {
		failed[img] = "Job " + job + " did not finish before its deadline"
	}
	return PinOutcome{Failed: failed}
}

// pinReport reads the report from the newest pod's terminated container.
func pinReport(pods []corev1.Pod) (pin.Report, bool) {
	pod := newest(pods)
	if pod == nil {
		return pin.Report{}, false
	}
	for _, cs := range pod.Status.ContainerStatuses {
		t := cs.State.Terminated
		if t == nil || strings.TrimSpace(t.Message) == "" {
			continue
		}
		if r, err := pin.ParseReport(t.Message); err == nil {
			return r, true
		}
	}
	return pin.Report{}, false
}

// fromReport: every image neither absent nor failed is done, unless the
// runtime cannot pin; a report cut short (Dropped) leaves the images it
// does not name unknown, counted as failed so that the next operation
// tries them again.
func fromReport(r pin.Report, images []string) PinOutcome {
	if r.Unsupported != "" {
		return PinOutcome{Unsupported: r.Unsupported}
	}
	out := PinOutcome{Failed: map[string]string{}}
	absent := map[string]bool{}
	for _, img := range r.Absent {
		absent[img] = true
	}
	for _, img := range images {
		switch msg, failed := r.Failed[img]; {
		case failed:
			out.Failed[img] = truncate(msg, MaxMessage)
		case absent[img]:
		case r.Dropped > 0:
			out.Failed[img] = "the helper's report was cut short; its result is unknown"
		default:
			out.Done = append(out.Done, img)
		}
	}
	return out
}
