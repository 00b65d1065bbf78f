package framework

import (
	"context"
	"fmt"
	"os"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/test/framework/repo"
)

// Our CRDs, files of config/crd/bases as `make manifests` generates them.
const (
	ImageCacheCRD  = "kubefledged.io_imagecaches.yaml"
	KubeFledgedCRD = "charts.helm.kubefledged.io_kubefledgeds.yaml"
)

// crdTimeout bounds the wait for one CRD to be served; an idle API server needs about a
// second, a loaded two-core machine a good deal more.
const crdTimeout = ClusterTimeout

// InstallCRDs creates the named CRDs of config/crd/bases, as CreateCRDs does.
func InstallCRDs(ctx context.Context, cfg *rest.Config, files ...string) error {
	var paths []string
	for _, f := range files {
		path, err := repo.Path("config", "crd", "bases", f)
		if err != nil {
			return err
		}
		paths = append(paths, path)
	}
	return CreateCRDs(ctx, cfg, paths...)
}

// CreateCRDs creates the CRDs of the given YAML files (one that exists already is kept) and
// returns once the API server serves each: Established, and listed by discovery, which is
// what a client's REST mapper reads and comes a moment later.
func CreateCRDs(ctx context.Context, cfg *rest.Config, paths ...string) error {
	cs, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, path := range paths {
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(raw, crd); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		_, err = cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
		}
		if err := waitServed(ctx, cs, kube, crd); err != nil {
			return err
		}
	}
	return nil
}

func waitServed(ctx context.Context, cs apiextensionsclient.Interface, kube kubernetes.Interface, crd *apiextensionsv1.CustomResourceDefinition) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, crdTimeout, true, func(ctx context.Context) (bool, error) {
		got, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			last = err
			return false, nil
		}
		if !apihelpers.IsCRDConditionTrue(got, apiextensionsv1.Established) {
			last = fmt.Errorf("not Established")
			return false, nil
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			l, err := kube.Discovery().ServerResourcesForGroupVersion(crd.Spec.Group + "/" + v.Name)
			if err != nil {
				last = err
				return false, nil
			}
			if !lists(l, crd.Spec.Names.Plural) {
				last = fmt.Errorf("%s/%s not in discovery", crd.Spec.Group, v.Name)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s not served: %v (last: %v)", crd.Name, err, last)
	}
	return nil
}

func lists(l *metav1.APIResourceList, plural string) bool {
	for _, r := range l.APIResources {
		if r.Name == plural {
			return true
		}
	}
	return false
}

// WaitEstablished waits up to timeout for the CRD of that name to be Established, as the
// CRDs that a procedure under test applies (Helm, OLM, kubectl), and returns it.
func WaitEstablished(g Gomega, c client.Client, name string, timeout time.Duration) *apiextensionsv1.CustomResourceDefinition {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(context.Background(), client.ObjectKey{Name: name}, crd)).To(Succeed())
		g.Expect(apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established)).To(BeTrue(), "CRD %s not established", name)
	}).WithTimeout(timeout).WithPolling(200 * time.Millisecond).Should(Succeed())
	return crd
}
