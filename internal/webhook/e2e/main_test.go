// Package e2e runs the webhook against a real kube-apiserver (the sandbox):
// the apiserver calls it over TLS through a ValidatingWebhookConfiguration,
// exactly as in a cluster, with the certificate kept by the webhook itself.
// It lives apart from package webhook so that fuzzing the handler does not
// start a control plane.
package e2e

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/webhook"
	"github.com/kubefledged/kube-fledged/internal/webhook/validation/validationtest"
	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

func TestMain(m *testing.M) {
	if os.Getenv("WEBHOOK_E2E_LOG") != "" {
		log.SetLogger(zap.New(zap.UseDevMode(true)))
	} else {
		log.SetLogger(logr.Discard())
	}
	sandbox.Main(m, sandbox.Options{})
}

var scheme = framework.Scheme()

// env is what every test needs: clients, and the CRD installed once.
type env struct {
	c    client.Client
	kube kubernetes.Interface
}

var crdInstalled bool

func setup(t *testing.T) *env {
	t.Helper()
	g := NewWithT(t)
	cfg := sandbox.Get().Config()
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	kube, err := kubernetes.NewForConfig(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	if !crdInstalled {
		g.Expect(framework.InstallCRDs(context.Background(), cfg, framework.ImageCacheCRD)).To(Succeed())
		crdInstalled = true
	}
	return &env{c: c, kube: kube}
}

func freePort() int {
	port, err := sandbox.FreePort()
	if err != nil {
		panic(err)
	}
	return port
}

// namespace creates a namespace labelled for one scenario, so that only that
// scenario's webhook configuration applies to it.
func (e *env) namespace(t *testing.T, scenario string) string {
	g := NewWithT(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: scenario + "-",
		Labels: map[string]string{"webhook-e2e": scenario}}}
	g.Expect(e.c.Create(context.Background(), ns)).To(Succeed())
	return ns.Name
}

// replica is one controller process's webhook part: a manager with the
// webhook server, the certificate keeper and the probes.
type replica struct {
	opts      webhook.Options
	probePort int
	cancel    func()
	done      chan error
}

// startReplica is not tied to a test: the replicas most tests share outlive
// the test that starts them and end with the process. Another process may
// bind the port between our pick and the server's (sandbox.FreePorts): the
// manager then fails as it starts, and the replica starts again on another
// port.
func startReplica(o webhook.Options) (*replica, error) {
	for try := 1; ; try++ {
		r, err := tryReplica(o)
		if err == nil || try == 5 || !strings.Contains(err.Error(), "address already in use") {
			return r, err
		}
		o.Port = freePort()
	}
}

// bindGrace is how long tryReplica watches a replica that does not serve yet
// for a failed bind.
const bindGrace = 5 * time.Second

func tryReplica(o webhook.Options) (*replica, error) {
	r := &replica{opts: o, probePort: freePort(), done: make(chan error, 1)}
	mgr, err := ctrl.NewManager(sandbox.Get().Config(), ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "127.0.0.1:" + strconv.Itoa(r.probePort),
		WebhookServer:          o.Server(),
		Logger:                 log.Log.WithName(fmt.Sprintf("replica-%d", o.Port)),
	})
	if err != nil {
		return nil, err
	}
	if err := webhook.Setup(mgr, o); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- mgr.Start(ctx) }()
	// Until it serves, or for bindGrace: a replica whose certificate
	// files are still to come (CertExternal) binds only once they are
	// there, and the tests that start one see to that.
	started := mgr.GetWebhookServer().StartedChecker()
	grace := time.After(bindGrace)
	for started(nil) != nil {
		select {
		case err := <-r.done:
			cancel()
			return nil, fmt.Errorf("replica on port %d: %w", o.Port, err)
		case <-grace:
			return r, nil
		case <-time.After(50 * time.Millisecond):
		}
	}
	return r, nil
}

func (r *replica) stop() error {
	r.cancel()
	select {
	case err := <-r.done:
		return err
	case <-time.After(30 * time.Second):
		return fmt.Errorf("replica on port %d did not stop", r.opts.Port)
	}
}

// scopedReplica stops with the test.
func scopedReplica(t *testing.T, o webhook.Options) *replica {
	t.Helper()
	r, err := startReplica(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.stop(); err != nil {
			t.Error(err)
		}
	})
	return r
}

func (r *replica) url() string {
	return "https://127.0.0.1:" + strconv.Itoa(r.opts.Port) + webhook.Path
}

func (r *replica) ready() error {
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(r.probePort) + "/readyz")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("readyz: %s", resp.Status)
	}
	return nil
}

// served returns the certificate the replica presents right now (DER).
func (r *replica) served() ([]byte, error) {
	conn, err := tls.Dial("tcp", "127.0.0.1:"+strconv.Itoa(r.opts.Port), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reads the served certificate, trusts nothing
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	certs := conn.ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return nil, errors.New("no certificate")
	}
	return certs[0].Raw, nil
}

// options are a replica's flags; the certificate directory lives in the
// sandbox's directory, removed with it.
func options(controllerNS, secret, configuration string) webhook.Options {
	port := freePort()
	dir := filepath.Join(sandbox.Get().Dir(), "webhook", strconv.Itoa(port))
	return webhook.Options{
		Enable: true, Port: port, CertDir: dir, CertManagement: webhook.CertSelf,
		SecretName: secret, ServiceName: "kubefledged-webhook", ConfigurationName: configuration,
		Namespace: controllerNS, ExtraHosts: []string{"127.0.0.1"},
		CertValidity: webhook.DefaultCertValidity, RotateBefore: webhook.DefaultRotateBefore,
	}
}

// configuration creates a ValidatingWebhookConfiguration with one webhook
// per replica, scoped to the scenario's namespaces. Without a bundle it
// starts with the placeholder the original's chart shipped: the keeper must
// fill it.
func (e *env) configuration(name, scenario string, bundle []byte, replicas ...*replica) error {
	if bundle == nil {
		bundle = []byte("Cg==")
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for i, r := range replicas {
		vwc.Webhooks = append(vwc.Webhooks, admissionregistrationv1.ValidatingWebhook{
			Name: fmt.Sprintf("r%d.%s", i, name),
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				URL: ptr.To(r.url()), CABundle: bundle,
			},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{"kubefledged.io"}, APIVersions: []string{"v1alpha2"},
					Resources: []string{"imagecaches"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"webhook-e2e": scenario}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](5),
		})
	}
	return e.c.Create(context.Background(), vwc)
}

// waitServing waits until the apiserver admits through every replica: a
// dry-run create of a good ImageCache passes only once each webhook answers
// over TLS that its bundle trusts. A good create also passes before the
// apiserver has seen the configuration at all, so the wait first needs a bad
// one refused by a webhook: the configuration is then in force.
func (e *env) waitServing(t *testing.T, ns string) {
	g := NewWithT(t)
	g.Eventually(func() error {
		bad := goodCache(ns, "probe-bad")
		bad.Spec.CacheSpec[0].Images = []string{"nginx", "nginx:latest"}
		err := e.c.Create(context.Background(), bad, client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), `admission webhook "`) || !apierrors.IsInvalid(err) {
			return fmt.Errorf("the webhooks do not refuse a bad ImageCache yet: %v", err)
		}
		return e.c.Create(context.Background(), goodCache(ns, "probe"), client.DryRunAll)
	}).WithTimeout(framework.ClusterTimeout).WithPolling(100 * time.Millisecond).Should(Succeed())
}

func goodCache(ns, name string) *v1alpha2.ImageCache { return validationtest.GoodCache(ns, name) }

// tlsCert returns the DER of a PEM certificate, as a TLS peer presents it.
func tlsCert(pemBytes []byte) ([]byte, error) {
	blk, _ := pem.Decode(pemBytes)
	if blk == nil {
		return nil, errors.New("no PEM block")
	}
	return blk.Bytes, nil
}

// denial extracts what the webhook said from an apiserver error, failing the
// test on any other kind of error (a TLS failure, a timeout).
func denial(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		t.Fatal("accepted, want rejected")
	}
	if !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
		t.Fatalf("not a rejection: %v", err)
	}
	return err.Error()
}
