package plan

import (
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
)

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
// needs it; Unsupported maps each node whose runtime cannot pin
// (jobs.CanPin) to that runtime, for the status to name.
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
		if !jobs.CanPin(w.Node.Runtime) {
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
