package install_test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/registry"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/test/framework"
)

// Install #1: the chart, as the chart README's `helm install kube-fledged
// oci://ghcr.io/kubefledged/charts/kubefledged -n kube-fledged --create-namespace` does
// it, through the Helm SDK, from the node's registry, where `make chart-push` put it.
const (
	helmRelease   = "kube-fledged"
	helmNamespace = "kube-fledged"
	// The chart's names for release kube-fledged: <release>-<chart>, as the release name
	// does not contain the chart's.
	helmFullname = "kube-fledged-kubefledged"
)

// TestHelm installs the chart with the retain policy and the controller pinned to the real
// node, runs the common end, whose policy change is a `helm upgrade` to delete, and
// uninstalls.
func TestHelm(t *testing.T) {
	framework.NeedRealNode(t)
	chrt := pushedChart(t)
	cfg := helmConfig(t)
	begin := time.Now()
	install := action.NewInstall(cfg)
	install.ReleaseName = helmRelease
	install.Namespace = helmNamespace
	install.CreateNamespace = true
	install.Timeout = framework.ClusterTimeout
	rel, err := install.Run(chrt, helmValues("retain"))
	if err != nil {
		t.Fatalf("helm install: %v", err)
	}
	t.Logf("helm install returned in %s (revision %d, %s)", time.Since(begin).Round(time.Millisecond), rel.Version, rel.Info.Status)
	t.Cleanup(func() { helmUninstall(t, cfg) })

	checkInstall(t, installation{
		how:                  "helm",
		began:                begin,
		namespace:            helmNamespace,
		deployment:           helmFullname + "-controller",
		webhookConfiguration: helmFullname,
		setRetention: func(t *testing.T, policy string) {
			upgrade := action.NewUpgrade(cfg)
			upgrade.Namespace = helmNamespace
			upgrade.Timeout = framework.ClusterTimeout
			if _, err := upgrade.Run(helmRelease, chrt, helmValues(policy)); err != nil {
				t.Fatalf("helm upgrade: %v", err)
			}
		},
	})

	// `helm test`: the chart's test Pod runs our image's `kubefledged check` on the node.
	// It passes; it fails, at once, while the API server admits what the webhook should
	// refuse; and it passes again, its failed run's leftovers replaced.
	helmTest(t, cfg, true)
	restore := admitEverything(t, helmFullname)
	helmTest(t, cfg, false)
	restore()
	helmTest(t, cfg, true)
}

// helmTest runs `helm test` on the release and holds it to pass or fail. A passing run
// leaves nothing behind (hook-succeeded); a failing one keeps its Pod for its logs.
func helmTest(t *testing.T, cfg *action.Configuration, pass bool) {
	t.Helper()
	begin := time.Now()
	rt := action.NewReleaseTesting(cfg)
	rt.Namespace = helmNamespace
	rt.Timeout = 3 * time.Minute
	rel, err := rt.Run(helmRelease)
	took := time.Since(begin).Round(time.Millisecond)
	if rel == nil {
		t.Fatalf("helm test: %v", err)
	}
	var logs strings.Builder
	if err != nil {
		// The test's Pod is kept, its output in its termination message (the sandbox's
		// API server cannot read the node's logs, as `helm test --logs` would).
		pod := &corev1.Pod{}
		if gerr := k8s.Get(context.Background(), client.ObjectKey{Namespace: helmNamespace, Name: helmFullname + "-test"}, pod); gerr != nil {
			fmt.Fprintf(&logs, "(reading the test Pod: %v)", gerr)
		}
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.State.Terminated != nil {
				logs.WriteString(cs.State.Terminated.Message)
			}
		}
	}
	switch {
	case pass && err != nil:
		t.Fatalf("helm test failed in %s: %v\n%s", took, err, logs.String())
	case !pass && err == nil:
		t.Fatalf("helm test passed in %s with a webhook that admits everything", took)
	case !pass && !strings.Contains(logs.String(), "the API server admitted an ImageCache"):
		t.Fatalf("helm test failed in %s, but not for the admitted ImageCache: %v\n%s", took, err, logs.String())
	}
	pods := &corev1.PodList{}
	if err := k8s.List(context.Background(), pods, client.InNamespace(helmNamespace), client.MatchingLabels{"app.kubernetes.io/component": "test"}); err != nil {
		t.Fatal(err)
	}
	if pass && len(pods.Items) != 0 {
		t.Errorf("a passing helm test left %d pods", len(pods.Items))
	}
	if !pass && len(pods.Items) != 1 {
		t.Errorf("a failing helm test left %d pods, want its one for the logs", len(pods.Items))
	}
	if err == nil {
		t.Logf("helm test passed in %s", took)
	} else {
		t.Logf("helm test failed as it must in %s: %s", took, strings.TrimSpace(logs.String()))
	}
}

// admitEverything points the webhook registration at a port its Service does not serve,
// with failurePolicy Ignore: the API server then admits every ImageCache unchecked, as a
// broken install would. It returns what puts the registration back.
func admitEverything(t *testing.T, name string) (restore func()) {
	t.Helper()
	ctx := context.Background()
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: name}, vwc); err != nil {
		t.Fatal(err)
	}
	saved := vwc.DeepCopy()
	vwc.Webhooks[0].FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
	vwc.Webhooks[0].ClientConfig.Service.Port = ptr.To[int32](1)
	if err := k8s.Update(ctx, vwc); err != nil {
		t.Fatal(err)
	}
	return func() {
		now := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: name}, now); err != nil {
			t.Fatal(err)
		}
		now.Webhooks = saved.Webhooks
		if err := k8s.Update(ctx, now); err != nil {
			t.Fatal(err)
		}
	}
}

// pushedChart runs `make chart-push` to the node's registry, as a release pushes the
// chart to ghcr.io, and pulls the chart back from there as `helm install oci://...` does:
// what is installed is what the push made, and it must be this tree's chart.
func pushedChart(t *testing.T) *chart.Chart {
	t.Helper()
	local, err := loader.Load(filepath.Join(repoDir, "helm-charts", "kubefledged"))
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	cmd := exec.Command("make", "-s", "chart-push", "CHART_REPO=oci://"+node.Registry()+"/charts", "CHART_OUT="+t.TempDir())
	cmd.Dir = repoDir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make chart-push: %v\n%s", err, out)
	}
	ref := fmt.Sprintf("%s/charts/%s:%s", node.Registry(), local.Metadata.Name, local.Metadata.Version)
	if !strings.Contains(string(out), "pushed "+ref) {
		t.Fatalf("make chart-push did not push %s:\n%s", ref, out)
	}
	rc, err := registry.NewClient(registry.ClientOptPlainHTTP())
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := rc.Pull(ref)
	if err != nil {
		t.Fatalf("pulling %s: %v", ref, err)
	}
	chrt, err := loader.LoadArchive(bytes.NewReader(pulled.Chart.Data))
	if err != nil {
		t.Fatalf("%s: %v", ref, err)
	}
	if len(chrt.Templates) != len(local.Templates) || chrt.Metadata.AppVersion != local.Metadata.AppVersion {
		t.Fatalf("%s has %d templates and appVersion %s; the tree's chart %d and %s",
			ref, len(chrt.Templates), chrt.Metadata.AppVersion, len(local.Templates), local.Metadata.AppVersion)
	}
	t.Logf("make chart-push pushed %s (manifest %s) and it pulled back in %s", ref, pulled.Manifest.Digest, time.Since(begin).Round(time.Millisecond))
	return chrt
}

// helmValues are the values of the install: the retention policy; the controller on the
// real node, by its hostname label, since a kwok node would only pretend to run it; and
// the node's containerd socket, which is not at the default path, for the delete Jobs.
// The image is left to the chart: its default is what the test pushed.
func helmValues(policy string) map[string]any {
	return map[string]any{
		"controller": map[string]any{
			"jobRetentionPolicy": policy,
			"criSocketPath":      node.CRISocket(),
		},
		"nodeSelector": map[string]any{corev1.LabelHostname: node.Name()},
	}
}

// helmConfig is what `helm --kubeconfig <sandbox> -n kube-fledged` uses.
func helmConfig(t *testing.T) *action.Configuration {
	t.Helper()
	return helmConfigIn(t, helmNamespace)
}

// helmConfigIn is helmConfig for another namespace.
func helmConfigIn(t *testing.T, ns string) *action.Configuration {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	kubeconfig := sb.KubeconfigPath()
	flags.KubeConfig, flags.Namespace = &kubeconfig, &ns
	cfg := &action.Configuration{}
	if err := cfg.Init(flags, ns, "secret", func(format string, args ...any) { t.Logf("helm: "+format, args...) }); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// helmUninstall removes the caches first, while the controller still runs, then the
// release, so that the next install path starts from an empty namespace; the chart's CRD
// stays, as Helm leaves CRDs.
func helmUninstall(t *testing.T, cfg *action.Configuration) {
	ctx := context.Background()
	if err := k8s.DeleteAllOf(ctx, &v1alpha2.ImageCache{}, client.InNamespace(helmNamespace)); err != nil {
		t.Errorf("deleting the caches: %v", err)
	}
	if _, err := action.NewUninstall(cfg).Run(helmRelease); err != nil {
		t.Errorf("helm uninstall: %v", err)
	}
}
