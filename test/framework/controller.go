package framework

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubefledged/kube-fledged/internal/commands"
)

// stopTimeout bounds the shutdown of what runs in-process: one that does not return by then
// is a defect (a worker that ignores its context), reported as such.
const stopTimeout = 30 * time.Second

// RunController runs the controller in-process, as the binary would with options o, against
// the cluster of cfg. The returned stop cancels it and reports an error it exited with; it
// is idempotent and also runs at the end of the test.
//
// The namespace the delete Jobs run in is made first if it is missing, as an install makes
// the controller's own.
func RunController(t testing.TB, cfg *rest.Config, o *commands.ControllerOptions) (stop func()) {
	t.Helper()
	if ns := o.DeleteJobNamespace; ns != "" {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		EnsureNamespace(t, cs, ns)
	}
	stop, _ = RunInProcess(t, "controller", func(ctx context.Context) error { return commands.RunController(ctx, cfg, o) })
	return stop
}

// RunInProcess runs what a binary's command would (named what in failures) in a goroutine
// of the test. stop cancels its context and fails the test if it returns an error or does
// not return within stopTimeout; it is idempotent and also runs at the end of the test.
// exited is closed once run has returned, for a caller that checks it starts at all.
func RunInProcess(t testing.TB, what string, run func(context.Context) error) (stop func(), exited <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var err error
	go func() {
		err = run(ctx)
		close(done)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
				if err != nil {
					t.Errorf("%s exited: %v", what, err)
				}
			case <-time.After(stopTimeout):
				t.Errorf("%s did not stop within %s of its context ending", what, stopTimeout)
			}
		})
	}
	t.Cleanup(stop)
	return stop, done
}

// EnsureNamespace makes namespace ns unless it exists: what an install does for the controller's
// own namespace, where the delete Jobs run, and which a test that runs the controller by
// itself must do in its place.
func EnsureNamespace(t testing.TB, cs kubernetes.Interface, ns string) {
	t.Helper()
	_, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace %s: %v", ns, err)
	}
}
