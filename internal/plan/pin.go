package plan

import (
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
)

// CanPin says whether a node's runtime (status.nodeInfo.containerRuntimeVersion)
// can pin: containerd 1.7 or newer, whose CRI reports an image labelled
// io.cri-containerd.pinned=pinned as pinned, so that the kubelet's image
// garbage collection keeps it. Older containerd ignores the label, CRI-O pins
// only from its configuration, cri-dockerd only with its own flags: a pin
// Job there would succeed and protect nothing, so none is made.
func CanPin(runtime string) bool {
	version, ok := strings.CutPrefix(runtime, "containerd://")
	if !ok {
		return false
	}
	version = strings.TrimPrefix(version, "v")
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return false
	}
	// A minor version may carry a distribution's suffix (7-k3s1): the
	// number is what comes first.
	major, err := strconv.Atoi(parts[0])
	if err != nil {
		return false
	}
	minor, err := strconv.Atoi(leadingDigits(parts[1]))
	if err != nil {
		return false
	}
	return major > 1 || (major == 1 && minor >= 7)
}

func leadingDigits(s string) string {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}

// PinInput is what deciding an operation's pins reads.
type PinInput struct {
	// Spec is what the operation acted on; Nodes the cluster's nodes, Only
	// those it served when set (a new-node operation).
	Spec         v1alpha2.ImageCacheSpec
	Nodes        []corev1.Node
	Only         map[string]bool
	StartupTaint *StartupTaint
	// Failed says whether the operation's pull of image on node failed:
	// an image not on the node has nothing to pin.
	Failed func(image, node string) bool
	// Pinned says whether this controller pinned image on node already.
	Pinned func(image, node string) bool
}

// PinWork is, per node, the images to pin there and the node as a Job
// needs it; Unsupported are the nodes whose runtime cannot pin (CanPin),
// with it.
type PinWork struct {
	Images      map[string][]string
	Nodes       map[string]jobs.Node
	Unsupported map[string]string
}

// Pins decides an operation's pins once its pulls have settled: every image
// its lists want on the nodes it served (pulled or present already),
// except those whose pull failed and those pinned already. The pairs are
// the plan's, as a pull of every image would make them, so that a node
// left out of the pulls (cordoned, NotReady, ...) is left out here too.
func Pins(in PinInput) PinWork {
	p := Build(Input{Op: Refresh, Spec: in.Spec, Nodes: in.Nodes, AlwaysPull: true, Only: in.Only, StartupTaint: in.StartupTaint})
	out := PinWork{Images: map[string][]string{}, Nodes: map[string]jobs.Node{}, Unsupported: map[string]string{}}
	for _, w := range p.Work {
		node := w.Node.Name
		if !CanPin(w.Node.Runtime) {
			out.Unsupported[node] = w.Node.Runtime
			continue
		}
		if in.Failed(w.Image, node) || in.Pinned(w.Image, node) {
			continue
		}
		out.Nodes[node] = w.Node
		out.Images[node] = append(out.Images[node], w.Image)
	}
	for _, imgs := range out.Images {
		sort.Strings(imgs)
	}
	return out
}
