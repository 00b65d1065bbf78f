package imagecache

import (
	"sort"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
)

// status is the cache's status.pins, bounded like podImages, and the pairs
// pinned in all.
func (l *pinLedger) status(uid types.UID) (*v1alpha2.PinStatus, int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := &v1alpha2.PinStatus{}
	c := l.caches[uid]
	if c == nil {
		return out, 0
	}
	var pinned int32
	for img, nodes := range c.pinned {
		if len(nodes) == 0 {
			continue
		}
		pinned += int32(len(nodes))
		out.Images = append(out.Images, v1alpha2.PinnedImage{Image: img, Nodes: int32(len(nodes))})
	}
	sort.Slice(out.Images, func(i, j int) bool { return out.Images[i].Image < out.Images[j].Image })
	if n := len(out.Images); n > v1alpha2.MaxPodImages {
		out.Omitted = int32(n - v1alpha2.MaxPodImages)
		out.Images = out.Images[:v1alpha2.MaxPodImages]
	}
	out.Unsupported = unsupportedNodes(c.unsupported)
	out.Failures, out.FailuresOmitted = pinFailures(c.failed)
	return out, pinned
}

// unsupportedNodes reports the nodes that cannot pin in SkippedNodes' shape.
func unsupportedNodes(nodes map[string]bool) []v1alpha2.SkippedNodes {
	if len(nodes) == 0 {
		return nil
	}
	left := make(map[string]string, len(nodes))
	for n := range nodes {
		left[n] = v1alpha2.PinUnsupported
	}
	return skippedNodes(left)
}

// pinFailures are the first MaxPinFailures failures, by image then node,
// and how many were left out.
func pinFailures(failed map[pinPair]string) ([]v1alpha2.PinFailure, int32) {
	out := make([]v1alpha2.PinFailure, 0, len(failed))
	for p, why := range failed {
		out = append(out, v1alpha2.PinFailure{Image: p.image, Node: p.node, Message: why})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Image != out[j].Image {
			return out[i].Image < out[j].Image
		}
		return out[i].Node < out[j].Node
	})
	if len(out) > v1alpha2.MaxPinFailures {
		return out[:v1alpha2.MaxPinFailures], int32(len(out) - v1alpha2.MaxPinFailures)
	}
	if len(out) == 0 {
		return nil, 0
	}
	return out, 0
}
