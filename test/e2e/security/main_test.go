// Package security proves what kube-fledged's components may and may not
// do, against the sandbox's real RBAC and admission: the controller's and
// the operator's roles (impersonating their ServiceAccounts), the pod
// security of everything they run, and a table of hostile and malformed
// custom resources that must be refused before they reach either of them.
package security

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/releaseutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/framework/repo"
	"github.com/kubefledged/kube-fledged/test/golden"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

func TestMain(m *testing.M) {
	sandbox.Main(m, sandbox.Options{Nodes: 1})
}

// Where the operator's RBAC lands: config/default's namespace and name
// prefix, as `make deploy` and the bundle name them.
const (
	operatorNS     = "kube-fledged-system"
	operatorPrefix = "kube-fledged-"
	operatorSA     = operatorPrefix + "operator"
	// The chart's release, as golden renders it.
	releaseNS    = golden.Namespace
	controllerSA = golden.ReleaseName + "-controller"
)

var scheme = framework.Scheme()

// world is the sandbox with both CRDs and both components' RBAC applied.
type world struct {
	root  string
	admin client.Client
	kube  kubernetes.Interface
	chart golden.Rendered // the chart with default values
}

var theWorld framework.Once[*world]

func setup(t *testing.T) *world {
	t.Helper()
	return theWorld.Get(t, build)
}

func build() (*world, error) {
	w := &world{}
	var err error
	if w.root, err = repo.Root(); err != nil {
		return nil, err
	}
	cfg := sandbox.Get().Config()
	if w.admin, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	if w.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	ctx := context.Background()
	if err := framework.InstallCRDs(ctx, cfg, framework.ImageCacheCRD, framework.KubeFledgedCRD); err != nil {
		return nil, err
	}
	for _, ns := range []string{releaseNS, operatorNS} {
		if err := w.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}

	// The controller's RBAC, exactly as the chart renders it by default.
	c, err := golden.LoadChart()
	if err != nil {
		return nil, err
	}
	if w.chart, err = golden.Render(c, nil); err != nil {
		return nil, err
	}
	for _, kind := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
		for _, m := range w.chart.Find(kind, "") {
			if err := w.apply(ctx, m.Content); err != nil {
				return nil, fmt.Errorf("%s %s: %w", kind, m.Head.Metadata.Name, err)
			}
		}
	}

	// The operator's, from config/rbac as config/default names them.
	for _, f := range []string{"service_account.yaml", "role.yaml", "role_binding.yaml", "leader_election_role.yaml", "leader_election_role_binding.yaml"} {
		raw, err := os.ReadFile(filepath.Join(w.root, "config", "rbac", f))
		if err != nil {
			return nil, err
		}
		if err := w.apply(ctx, kustomized(string(raw))); err != nil {
			return nil, fmt.Errorf("config/rbac/%s: %w", f, err)
		}
	}
	return w, nil
}

// kustomized applies config/default's namespace and name prefix to one
// config/rbac object, as kustomize would (kustomize is not a test tool).
func kustomized(doc string) string {
	var out []string
	for _, line := range strings.Split(doc, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "namespace: system":
			line = strings.Replace(line, "system", operatorNS, 1)
		case strings.HasPrefix(trimmed, "name: ") && !strings.HasPrefix(trimmed, "name: kube-fledged"):
			line = strings.Replace(line, "name: ", "name: "+operatorPrefix, 1)
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// apply creates the object in a YAML document, or updates it.
func (w *world) apply(ctx context.Context, doc string) error {
	obj, _, err := clientgoscheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
	if err != nil {
		return err
	}
	o, ok := obj.(client.Object)
	if !ok {
		return fmt.Errorf("%T is no object", obj)
	}
	if err := w.admin.Create(ctx, o); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return err
		}
		cur := o.DeepCopyObject().(client.Object)
		if err := w.admin.Get(ctx, client.ObjectKeyFromObject(o), cur); err != nil {
			return err
		}
		o.SetResourceVersion(cur.GetResourceVersion())
		return w.admin.Update(ctx, o)
	}
	return nil
}

// as returns a config that impersonates a ServiceAccount. The apiserver adds
// the ServiceAccount groups itself, as it does for a real token.
func as(ns, sa string) *rest.Config {
	cfg := sandbox.Get().Config()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + sa}
	return cfg
}

// manifestsOf renders the chart with values and returns its manifests.
func manifestsOf(t *testing.T, vals map[string]interface{}) []releaseutil.Manifest {
	t.Helper()
	c, err := golden.LoadChart()
	if err != nil {
		t.Fatal(err)
	}
	r, err := golden.Render(c, vals)
	if err != nil {
		t.Fatal(err)
	}
	return r.Manifests
}
