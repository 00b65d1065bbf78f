package install_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
)

// Install #1: the chart, as README's `helm install kube-fledged helm-charts/kubefledged -n
// kube-fledged --create-namespace` does it, through the Helm SDK.
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
	needNode(t)
	chrt, err := loader.Load(filepath.Join(repo, "helm-charts", "kubefledged"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := helmConfig(t)
	begin := time.Now()
	install := action.NewInstall(cfg)
	install.ReleaseName = helmRelease
	install.Namespace = helmNamespace
	install.CreateNamespace = true
	install.Timeout = time.Minute
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
			upgrade.Timeout = time.Minute
			if _, err := upgrade.Run(helmRelease, chrt, helmValues(policy)); err != nil {
				t.Fatalf("helm upgrade: %v", err)
			}
		},
	})
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
	flags := genericclioptions.NewConfigFlags(false)
	kubeconfig, ns := sb.KubeconfigPath(), helmNamespace
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
