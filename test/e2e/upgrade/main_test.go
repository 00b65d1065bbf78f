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
	"os"
	"path/filepath"
	"sync"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// Two nodes report the images their pods ran, as kubelets do, so that the
// original's pulls are visible to our controller and "already present" is
// real.
func TestMain(m *testing.M) {
	sandbox.Main(m, sandbox.Options{Nodes: 2, ReportImages: true})
}

var logOnce sync.Once

// logToFile sends controller-runtime's log (our controller's and our
// operator's, both in-process) to a file beside the sandbox's logs: one
// logger per process, set before either starts.
func logToFile(t *testing.T) {
	t.Helper()
	logOnce.Do(func() {
		f, err := os.Create(filepath.Join(sandbox.Get().Dir(), "upgrade.log"))
		if err != nil {
			t.Fatal(err)
		}
		ctrl.SetLogger(zap.New(zap.WriteTo(f)))
	})
}
