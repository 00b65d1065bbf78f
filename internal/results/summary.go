package results

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
)

// Item is one settled work item.
type Item struct {
	Image   string
	Node    string
	Outcome Outcome
}

// Summary is the final status of an operation.
type Summary struct {
	Status   v1alpha2.ImageCacheActionStatus
	Message  string
	Failures map[string]v1alpha2.NodeReasonMessageList
	// Kept are the deletes that left their image on the node, and why
	// (Deleted): successes, not failures.
	Kept map[string]v1alpha2.NodeReasonMessageList
}

// Unrun are the pairs of an operation that got no Job.
type Unrun struct {
	// Present pairs are on nodes that already report the image.
	Present int
	// Skipped pairs are on nodes the lists select but the operation left
	// out (plan.Skip); Lacking are those of the nodes that do not report
	// every image, with the reason each was left out.
	Skipped int
	Lacking map[string]string
}

// Summarise turns the outcomes of an operation into the original's final
// status: Succeeded when nothing failed, Failed when anything did (listed
// per image and node), NoImagesPulledOrDeleted when no node matched, so
// that the operation had no (image, node) pair at all. Present pairs
// needed no Job because the node already had the image: like the
// original's "alreadypulled" they are successes, so a warm cluster's
// refresh ends Succeeded.
//
// Nodes that matched but were all left out are not "no node matched":
// when one of them lacks an image, nothing was pulled and nothing could
// be, and the original (whose Jobs ran on such nodes) would have failed
// there; Succeeded would be a green over nodes without the images. The
// failures stay empty (no Job failed): the Ready condition says which
// nodes and why (see Ready). purge selects the wording of a purge, which
// skips only nodes that cannot hold our images.
func Summarise(items []Item, unrun Unrun, purge bool) Summary {
	if len(items) == 0 && unrun.Present == 0 {
		switch {
		case unrun.Skipped == 0:
			return Summary{Status: v1alpha2.ImageCacheActionStatusNoImagesPulledOrDeleted, Message: v1alpha2.ImageCacheMessageNoImagesPulledOrDeleted}
		case len(unrun.Lacking) > 0 && !purge:
			return Summary{Status: v1alpha2.ImageCacheActionStatusFailed, Message: v1alpha2.ImageCacheMessageImagePullFailedForSomeImages}
		}
	}
	failures := map[string]v1alpha2.NodeReasonMessageList{}
	var kept map[string]v1alpha2.NodeReasonMessageList
	for _, it := range items {
		if it.Outcome.State == Succeeded {
			if it.Outcome.Reason != "" {
				if kept == nil {
					kept = map[string]v1alpha2.NodeReasonMessageList{}
				}
				kept[it.Image] = append(kept[it.Image], v1alpha2.NodeReasonMessage{Node: it.Node, Reason: it.Outcome.Reason, Message: it.Outcome.Message})
			}
			continue
		}
		failures[it.Image] = append(failures[it.Image], v1alpha2.NodeReasonMessage{
			Node: it.Node, Reason: nonEmpty(it.Outcome.Reason, "Unknown"), Message: it.Outcome.Message,
		})
	}
	for _, m := range []map[string]v1alpha2.NodeReasonMessageList{failures, kept} {
		for img := range m {
			l := m[img]
			sort.Slice(l, func(i, j int) bool { return l[i].Node < l[j].Node })
		}
	}
	s := Summary{Status: v1alpha2.ImageCacheActionStatusSucceeded, Message: v1alpha2.ImageCacheMessageImagesPulledSuccessfully, Kept: kept}
	if purge {
		s.Message = v1alpha2.ImageCacheMessageImagesDeletedSuccessfully
	}
	if len(failures) > 0 {
		s.Status = v1alpha2.ImageCacheActionStatusFailed
		s.Failures = failures
		s.Message = v1alpha2.ImageCacheMessageImagePullFailedForSomeImages
		if purge {
			s.Message = v1alpha2.ImageCacheMessageImageDeleteFailedForSomeImages
		}
	}
	return s
}

// Readiness is the Ready condition an operation's end sets.
type Readiness struct {
	Status          metav1.ConditionStatus
	Reason, Message string
}

// Ready says whether every node the lists select holds every image: True
// only when no pair failed (failed counts those left out of the status for
// size too) and no selected node was left out without the images (lacking,
// see Unrun). A node left out is what a cordon, a NotReady node or a
// Windows pool makes, not a failure of a Job, so it gets a reason of its
// own, NodesSkipped, that says which nodes: Ready must not be True over
// them, and the failing-since metric and its alert, which read the reason
// Failed, must not count a drain as a broken registry. detail is the
// operation's message, with what the controller knows beyond it.
func Ready(status v1alpha2.ImageCacheActionStatus, failed int, lacking map[string]string, detail string) Readiness {
	switch {
	case failed > 0:
		return Readiness{Status: metav1.ConditionFalse, Reason: string(v1alpha2.ImageCacheActionStatusFailed), Message: detail}
	case len(lacking) > 0:
		return Readiness{Status: metav1.ConditionFalse, Reason: v1alpha2.ReadyReasonNodesSkipped, Message: LackingMessage(lacking)}
	case status == v1alpha2.ImageCacheActionStatusSucceeded, status == v1alpha2.ImageCacheActionStatusNoImagesPulledOrDeleted:
		return Readiness{Status: metav1.ConditionTrue, Reason: string(status), Message: detail}
	}
	return Readiness{Status: metav1.ConditionFalse, Reason: string(status), Message: detail}
}

// LackingMessage names the selected nodes left out without the images, by
// reason, at most v1alpha2.MaxSkippedNames of each.
func LackingMessage(lacking map[string]string) string {
	byReason := map[string][]string{}
	for n, why := range lacking {
		byReason[why] = append(byReason[why], n)
	}
	reasons := make([]string, 0, len(byReason))
	for why := range byReason {
		reasons = append(reasons, why)
	}
	sort.Strings(reasons)
	parts := make([]string, 0, len(reasons))
	for _, why := range reasons {
		names := byReason[why]
		sort.Strings(names)
		list := strings.Join(names[:min(len(names), v1alpha2.MaxSkippedNames)], ", ")
		if len(names) > v1alpha2.MaxSkippedNames {
			list += fmt.Sprintf(" and %d more", len(names)-v1alpha2.MaxSkippedNames)
		}
		parts = append(parts, fmt.Sprintf("%d %s (%s)", len(names), why, list))
	}
	return fmt.Sprintf("%d selected node(s) do not report every image and got no pull Job: %s", len(lacking), strings.Join(parts, "; "))
}

// Carry adds to an operation's failures (now) the earlier ones (before) it
// did not retry: those on nodes it left out (node to reason) of images its
// spec still wants. Replacing the failures with its own, an operation would
// drop a pair it never ran, and a node still without the image would look
// fixed. A failure on a node it served is replaced by what it found there;
// one of an image the spec no longer has, or on a node no list selects any
// more, is gone with the want.
func Carry(before map[string]v1alpha2.NodeReasonMessageList, left map[string]string, wanted map[string]bool, now map[string]v1alpha2.NodeReasonMessageList) map[string]v1alpha2.NodeReasonMessageList {
	var out map[string]v1alpha2.NodeReasonMessageList
	add := func(img string, f v1alpha2.NodeReasonMessage) {
		if out == nil {
			out = map[string]v1alpha2.NodeReasonMessageList{}
		}
		out[img] = append(out[img], f)
	}
	for img, l := range now {
		for _, f := range l {
			add(img, f)
		}
	}
	for img, l := range before {
		if !wanted[img] {
			continue
		}
		for _, f := range l {
			if _, skipped := left[f.Node]; skipped && !has(now[img], f.Node) {
				add(img, f)
			}
		}
	}
	for img := range out {
		l := out[img]
		sort.Slice(l, func(i, j int) bool { return l[i].Node < l[j].Node })
	}
	return out
}

func has(l v1alpha2.NodeReasonMessageList, node string) bool {
	for _, f := range l {
		if f.Node == node {
			return true
		}
	}
	return false
}
