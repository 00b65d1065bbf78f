package chaos

import (
	"testing"
	"time"

	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// pullDelay keeps each pull pending for a while on the fake nodes, so that
// operations last long enough to be interrupted at many points.
const pullDelay = 1500 * time.Millisecond

func TestMain(m *testing.M) {
	Main(m, "chaos", sandbox.Options{Nodes: 3, PullDelay: pullDelay})
}
