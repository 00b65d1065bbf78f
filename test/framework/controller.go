package framework

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubefledged/kube-fledged/internal/commands"
)

// stopTimeout bounds a controller's shutdown: one that does not return by then is a defect
// (a worker that ignores its context), reported as such.
const stopTimeout = 30 * time.Second

// RunController runs the controller in-process, as the binary would with options o, against
// the cluster of cfg. The returned stop cancels it and reports an error it exited with; it
// is idempotent and also runs at the end of the test.
func RunController(t testing.TB, cfg *rest.Config, o *commands.ControllerOptions) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- commands.RunController(ctx, cfg, o) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("controller exited: %v", err)
				}
			case <-time.After(stopTimeout):
				t.Errorf("controller did not stop within %s", stopTimeout)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
