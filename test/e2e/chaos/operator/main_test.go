// Package operator kills the KubeFledged operator in the middle of Helm
// upgrades and checks that the release converges once it is back, and that
// nothing of the release is ever uninstalled on the way.
package operator

import (
	"testing"

	"github.com/kubefledged/kube-fledged/test/e2e/chaos"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

func TestMain(m *testing.M) {
	chaos.Main(m, "operator", sandbox.Options{Nodes: 1})
}
