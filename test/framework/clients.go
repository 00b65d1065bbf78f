package framework

import (
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// Connect makes the two clients the suites talk to a cluster with: controller-runtime's,
// with Scheme's types, for the objects a test writes and reads; client-go's, for what only
// it serves (discovery, typed watches, subresources such as a Node's status).
func Connect(cfg *rest.Config) (client.WithWatch, kubernetes.Interface, error) {
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return nil, nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	return c, kube, nil
}

// Clients connects to the sandbox of a suite run by sandbox.Main, failing t if it cannot.
func Clients(t testing.TB) (client.WithWatch, kubernetes.Interface) {
	t.Helper()
	c, kube, err := Connect(sandbox.Get().Config())
	if err != nil {
		t.Fatal(err)
	}
	return c, kube
}
