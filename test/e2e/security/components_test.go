package security

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/cli"
	"github.com/kubefledged/kube-fledged/internal/commands"
	"github.com/kubefledged/kube-fledged/internal/operator"
	"github.com/kubefledged/kube-fledged/internal/webhook"
	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/golden"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// running is a component started in-process for the rest of the package.
type running struct {
	probe string // http://host:port of /healthz and /readyz, or ""
	done  chan error
}

// alive reports an exit, or a probe that does not answer ok.
func (r *running) alive() error {
	select {
	case err := <-r.done:
		return fmt.Errorf("exited: %v", err)
	default:
	}
	if r.probe == "" {
		return nil
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(r.probe + path)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", path, resp.Status)
		}
	}
	return nil
}

// startController runs the controller in-process with the flags the chart
// renders and, as its ServiceAccount, the rights the chart grants: whatever
// it needs and lacks fails here, as it would in a cluster. Only what cannot
// work on loopback changes: ports, the certificate directory, and the
// webhook's address (a URL instead of the Service, which nothing routes in
// the sandbox; the certificate keeper then names 127.0.0.1 too).
func startController(t *testing.T, w *world) *running {
	t.Helper()
	setLogger(t)
	d := &appsv1.Deployment{}
	dep := w.chart.Find("Deployment", golden.ReleaseName+"-controller")
	if len(dep) != 1 {
		t.Fatal("no controller Deployment rendered")
	}
	if err := yaml.UnmarshalStrict([]byte(dep[0].Content), d); err != nil {
		t.Fatal(err)
	}
	args := d.Spec.Template.Spec.Containers[0].Args
	o := commands.NewControllerOptions()
	fs := cli.NewFlagSet("controller")
	o.BindFlags(fs)
	if err := cli.Parse(fs, args[1:]); err != nil {
		t.Fatalf("the chart's controller args do not parse: %v", err)
	}
	probe := framework.FreeAddr(t)
	o.MetricsAddr, o.ProbeAddr = "0", probe
	o.Webhook.Port = framework.FreePort(t)
	o.Webhook.CertDir = filepath.Join(sandbox.Get().Dir(), "webhook-certs")
	o.Webhook.Namespace = releaseNS
	o.Webhook.ExtraHosts = []string{"127.0.0.1"}

	// The chart's webhook registration, pointed at the loopback server.
	vwcs := w.chart.Find("ValidatingWebhookConfiguration", "")
	if len(vwcs) != 1 {
		t.Fatal("no ValidatingWebhookConfiguration rendered")
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := yaml.UnmarshalStrict([]byte(vwcs[0].Content), vwc); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("https://127.0.0.1:%d%s", o.Webhook.Port, webhook.Path)
	for i := range vwc.Webhooks {
		vwc.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url}
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{probe: "http://" + probe, done: make(chan error, 1)}
	go func() { r.done <- commands.RunController(ctx, as(releaseNS, controllerSA), o) }()
	if err := w.admin.Create(context.Background(), vwc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Registration first: with the server gone, failurePolicy Fail would
		// refuse every ImageCache write of later tests.
		_ = w.admin.Delete(context.Background(), vwc)
		cancel()
		select {
		case err := <-r.done:
			if err != nil {
				t.Errorf("controller: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("the controller did not stop in 30s")
		}
	})
	// Serving once the apiserver admits through it.
	deadline := time.Now().Add(framework.ClusterTimeout)
	for {
		probeCache := &v1alpha2.ImageCache{}
		probeCache.Namespace, probeCache.Name = "default", "probe"
		probeCache.Spec.CacheSpec = []v1alpha2.CacheSpecImages{{Images: []string{"nginx:1.27"}}}
		err := w.admin.Create(context.Background(), probeCache, client.DryRunAll)
		if err == nil && r.alive() == nil {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("the controller's webhook does not serve after %s: %v / %v", framework.ClusterTimeout, err, r.alive())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// startOperator runs the operator in-process as its ServiceAccount, with
// leader election as deployed.
func startOperator(t *testing.T, w *world) *running {
	t.Helper()
	setLogger(t)
	probe := framework.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{probe: "http://" + probe, done: make(chan error, 1)}
	go func() {
		r.done <- operator.Run(ctx, as(operatorNS, operatorSA), operator.Options{
			WatchesFile: filepath.Join(w.root, "watches.yaml"), Namespace: operatorNS, LeaderElect: true, LeaderElectionNamespace: operatorNS,
			MetricsAddr: "0", ProbeAddr: probe, MaxConcurrentReconciles: 2, MaxReleaseHistory: 3,
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(30 * time.Second):
			t.Error("the operator did not stop in 30s")
		}
	})
	deadline := time.Now().Add(framework.ClusterTimeout)
	for r.alive() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the operator is not healthy after %s: %v", framework.ClusterTimeout, r.alive())
		}
		time.Sleep(250 * time.Millisecond)
	}
	return r
}

// setLogger sends both components' logs to a file in the sandbox directory.
func setLogger(t *testing.T) {
	t.Helper()
	if err := framework.LogToFile(filepath.Join(sandbox.Get().Dir(), "components.log")); err != nil {
		t.Fatal(err)
	}
}
