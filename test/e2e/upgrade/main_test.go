// Package upgrade_test follows docs/install.md, "From the original
// kube-fledged", on a sandbox cluster: it sets up what a cluster running the
// original v0.10 holds (its CRD, ImageCaches with the status it wrote, its
// leftover Jobs, its Helm release or its operator and KubeFledged resource,
// nodes that already report the cached images), runs the documented steps
// as they are written, and checks what the procedure promises.
//
// The original's objects come from fixtures under testdata, written from
// facts about it (names, kinds, labels, the CRD's shape), not from its code.
// The documented kubectl commands run verbatim through bash with the
// sandbox's kubeconfig and bin/kubectl; the helm commands, for want of a
// helm binary, are checked to be in the document and run through the Helm
// SDK with the same arguments.
package upgrade_test

import (
	"testing"

	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// Two nodes report the images their pods ran, as kubelets do, so that the
// original's pulls are visible to our controller and "already present" is
// real.
func TestMain(m *testing.M) {
	sandbox.Main(m, sandbox.Options{Nodes: 2, ReportImages: true})
}
