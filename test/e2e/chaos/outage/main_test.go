// Package outage takes the control plane, or the controller's leader, away
// in the middle of ImageCache operations: kube-apiserver and etcd restarts,
// and the leader of two controller replicas killed. It has a sandbox of its
// own because restarting the apiserver would disturb any other test sharing
// it.
package outage

import (
	"testing"
	"time"

	"github.com/kubefledged/kube-fledged/test/e2e/chaos"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

func TestMain(m *testing.M) {
	chaos.Main(m, "outage", sandbox.Options{Nodes: 3, PullDelay: 1500 * time.Millisecond})
}
