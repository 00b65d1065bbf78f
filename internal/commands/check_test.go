package commands

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kubefledged/kube-fledged/internal/cli"
)

// probes serves /healthz and /readyz with the given statuses on 127.0.0.1
// and returns its port.
func probes(t *testing.T, healthz, readyz int) int {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(healthz) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(readyz)
		_, _ = w.Write([]byte("[-]ping failed"))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	return p
}

func controllerPod(name string, phase corev1.PodPhase, ip string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-fledged", Name: name, Labels: map[string]string{"app.kubernetes.io/component": "controller"}},
		Status:     corev1.PodStatus{Phase: phase, PodIP: ip},
	}
}

func newChecker(t *testing.T, port int, create func(client.Object) error, pods ...*corev1.Pod) (*checker, *bytes.Buffer) {
	t.Helper()
	cs := fake.NewClientset()
	for _, p := range pods {
		if _, err := cs.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	caches := ctrlfake.NewClientBuilder().WithScheme(Scheme()).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			co := &client.CreateOptions{}
			co.ApplyOptions(opts)
			if len(co.DryRun) != 1 || co.DryRun[0] != metav1.DryRunAll {
				t.Errorf("the check creates for real: %+v", co)
			}
			return create(obj)
		},
	}).Build()
	out := &bytes.Buffer{}
	return &checker{
		opts: checkOptions{Namespace: "kube-fledged", Selector: "app.kubernetes.io/component=controller", HealthPort: port,
			Webhook: true, WebhookName: ChartWebhookName, Interval: 10 * time.Millisecond, Timeout: cli.Duration{Value: 300 * time.Millisecond}},
		pods: cs, caches: caches, http: &http.Client{Timeout: time.Second}, out: out,
	}, out
}

func refused(client.Object) error {
	return errors.New(`admission webhook "validate-image-cache.kubefledged.io" denied the request: spec.cacheSpec[0].images[0]: Invalid value: "Not/A Valid:Reference"`)
}

func TestCheckPasses(t *testing.T) {
	g := NewWithT(t)
	port := probes(t, 200, 200)
	c, out := newChecker(t, port, refused,
		controllerPod("a", corev1.PodRunning, "127.0.0.1"), controllerPod("b", corev1.PodPending, ""))
	g.Expect(c.run(context.Background())).To(Succeed())
	g.Expect(out.String()).To(ContainSubstring("controller pod a (127.0.0.1): /healthz and /readyz answer ok"))
	g.Expect(out.String()).NotTo(ContainSubstring("pod b"))
	g.Expect(out.String()).To(ContainSubstring("refused an invalid ImageCache"))
}

func TestCheckFails(t *testing.T) {
	up := probes(t, 200, 200)
	notReady := probes(t, 200, 500)
	var calls atomic.Int32
	for _, tt := range []struct {
		name   string
		port   int
		create func(client.Object) error
		pods   []*corev1.Pod
		want   string
	}{
		{"no pod", up, refused, nil, "controller health: not passed within 300ms: no running pod in kube-fledged matches"},
		{"not ready", notReady, refused, []*corev1.Pod{controllerPod("a", corev1.PodRunning, "127.0.0.1")}, "pod a: http://127.0.0.1:"},
		{"nothing listens", 1, refused, []*corev1.Pod{controllerPod("a", corev1.PodRunning, "127.0.0.1")}, "connection refused"},
		{"admitted", up, func(client.Object) error { calls.Add(1); return nil },
			[]*corev1.Pod{controllerPod("a", corev1.PodRunning, "127.0.0.1")}, `webhook: the API server admitted an ImageCache with image "Not/A Valid:Reference"`},
		{"another webhook refuses", up, func(client.Object) error {
			return errors.New(`admission webhook "policy.example.com" denied the request: no`)
		}, []*corev1.Pod{controllerPod("a", corev1.PodRunning, "127.0.0.1")}, "webhook: not passed within 300ms"},
		{"no endpoints", up, func(client.Object) error {
			return apierrors.NewInternalError(errors.New(`failed calling webhook "validate-image-cache.kubefledged.io": no endpoints available for service "kubefledged-webhook"`))
		}, []*corev1.Pod{controllerPod("a", corev1.PodRunning, "127.0.0.1")}, "no endpoints available"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			calls.Store(0)
			c, _ := newChecker(t, tt.port, tt.create, tt.pods...)
			err := c.run(context.Background())
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tt.want))
			if tt.name == "admitted" {
				g.Expect(calls.Load()).To(Equal(int32(1)), "an admitted cache is an answer, not retried")
			}
		})
	}
}

// A webhook that is late to answer (the Service's endpoints follow the
// pods' readiness) is waited for.
func TestCheckWaitsForTheWebhook(t *testing.T) {
	g := NewWithT(t)
	var n atomic.Int32
	c, _ := newChecker(t, probes(t, 200, 200), func(o client.Object) error {
		if n.Add(1) < 3 {
			return errors.New("no endpoints available")
		}
		return refused(o)
	}, controllerPod("a", corev1.PodRunning, "127.0.0.1"))
	g.Expect(c.run(context.Background())).To(Succeed())
	g.Expect(n.Load()).To(Equal(int32(3)))
}

// The name the check waits to see refusing is the chart's webhook's.
func TestChartWebhookName(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "helm-charts", "kubefledged", "templates", "validatingwebhookconfiguration.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "  - name: "+ChartWebhookName+"\n") {
		t.Errorf("the chart's webhook is not named %s", ChartWebhookName)
	}
}

// The attempt that the timeout cuts short says only that time ran out; the
// reason reported is the one before it.
func TestCheckReportsTheReasonNotTheTimeout(t *testing.T) {
	g := NewWithT(t)
	c, _ := newChecker(t, 1, refused)
	// The first attempt fails at once and every later one runs until the timeout: an
	// attempt that raced the timeout would leave which came first to the scheduler.
	attempts := 0
	err := c.retry(context.Background(), "controller health", func(ctx context.Context) error {
		if attempts++; attempts == 1 {
			return errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
		}
		<-ctx.Done()
		return ctx.Err()
	})
	g.Expect(err).To(MatchError(ContainSubstring("not passed within 300ms: dial tcp 127.0.0.1:1: connect: connection refused")))
}
