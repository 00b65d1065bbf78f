// Package helmop drives the Helm side of kube-fledged from a test: the KubeFledged operator
// run in-process and the Helm client configured for the sandbox. It is apart from package
// framework so that the suites that need neither do not build Helm.
package helmop

import (
	"context"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"

	"github.com/kubefledged/kube-fledged/internal/operator"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// Bounds of an operator run: one that returns within startupGrace gave up at start-up, and
// one that is still running stopTimeout after its context ended ignores its context.
const (
	startupGrace = 500 * time.Millisecond
	stopTimeout  = 30 * time.Second
)

// RunOperator runs the operator in-process with options o until the test ends, and fails
// the test if it gives up at start-up or returns an error.
func RunOperator(t testing.TB, cfg *rest.Config, o operator.Options) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- operator.Run(ctx, cfg, o) }()
	select {
	case err := <-done:
		cancel()
		t.Fatalf("the operator returned at once: %v", err)
	case <-time.After(startupGrace):
	}
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the operator returned %v", err)
			}
		case <-time.After(stopTimeout):
			t.Errorf("the operator did not stop within %s of its context ending", stopTimeout)
		}
	})
}

// HelmConfig is what `helm --kubeconfig <sandbox> -n ns` uses.
func HelmConfig(t testing.TB, ns string) *action.Configuration {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	kubeconfig := sandbox.Get().KubeconfigPath()
	flags.KubeConfig = &kubeconfig
	flags.Namespace = &ns
	cfg := &action.Configuration{}
	if err := cfg.Init(flags, ns, "secret", func(string, ...interface{}) {}); err != nil {
		t.Fatal(err)
	}
	return cfg
}
