package results

import (
	"sort"

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
}

// Summarise turns the outcomes of an operation into the original's final
// status: Succeeded when nothing failed, Failed when anything did (listed
// per image and node), NoImagesPulledOrDeleted when the operation had no
// (image, node) pair at all. present counts the pairs that needed no Job
// because the node already had the image: like the original's
// "alreadypulled" they are successes, so a warm cluster's refresh ends
// Succeeded. purge selects the wording of a purge.
func Summarise(items []Item, present int, purge bool) Summary {
	if len(items) == 0 && present == 0 {
		return Summary{Status: v1alpha2.ImageCacheActionStatusNoImagesPulledOrDeleted, Message: v1alpha2.ImageCacheMessageNoImagesPulledOrDeleted}
	}
	failures := map[string]v1alpha2.NodeReasonMessageList{}
	for _, it := range items {
		if it.Outcome.State == Succeeded {
			continue
		}
		failures[it.Image] = append(failures[it.Image], v1alpha2.NodeReasonMessage{
			Node: it.Node, Reason: nonEmpty(it.Outcome.Reason, "Unknown"), Message: it.Outcome.Message,
		})
	}
	for img := range failures {
		l := failures[img]
		sort.Slice(l, func(i, j int) bool { return l[i].Node < l[j].Node })
	}
	s := Summary{Status: v1alpha2.ImageCacheActionStatusSucceeded, Message: v1alpha2.ImageCacheMessageImagesPulledSuccessfully}
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
