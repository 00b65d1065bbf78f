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
	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// startupGrace is how soon an operator that returns gave up at start-up.
const startupGrace = 500 * time.Millisecond

// RunOperator runs the operator in-process with options o until the test ends, and fails
// the test if it gives up at start-up or returns an error.
func RunOperator(t testing.TB, cfg *rest.Config, o operator.Options) {
	t.Helper()
	stop, exited := framework.RunInProcess(t, "the operator", func(ctx context.Context) error { return operator.Run(ctx, cfg, o) })
	select {
	case <-exited:
		stop()
		t.Fatal("the operator returned at once")
	case <-time.After(startupGrace):
	}
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
