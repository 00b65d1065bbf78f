package upgrade_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/action"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/operator"
	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/framework/helmop"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// The operator case's own steps of docs/install.md, word for word.
var stepsStopOperator = []string{
	`kubectl delete deployment kubefledged-operator -n "$NS"`,
	`kubectl delete clusterrolebinding kubefledged-operator`,
	`kubectl delete clusterrole kubefledged-operator`,
	`kubectl delete serviceaccount kubefledged-operator -n "$NS"`,
}

const stepKubeFledgedCRD = `kubectl apply --server-side --force-conflicts -f config/crd/bases/charts.helm.kubefledged.io_kubefledgeds.yaml`

// The original operator's finalizer, the one helm operators put on the
// resources whose release they installed; ours uses the same.
const uninstallFinalizer = "uninstall-helm-release"

// TestFromOperator upgrades an original installed by its operator: the
// original operator runs, its KubeFledged resource (the original chart's
// values, flat args.* keys and all) stands for a Helm release it installed
// and describes in its status. The resource is named fledged, so the
// original's objects are fledged-kube-fledged-*. After the procedure our
// operator, given that same resource, must install our chart with the same
// settings, and nothing of the original may be left.
func TestFromOperator(t *testing.T) {
	g := NewWithT(t)
	c, _ := framework.Clients(t)
	ctx := context.Background()
	p := procedure{ns: "fledged-system", release: "fledged", fullname: "fledged-kube-fledged"}

	// --- The cluster as the original operator left it. ---
	lap := freshCluster(t, g, c, p.ns)
	g.Expect(framework.CreateCRDs(ctx, sandbox.Get().Config(),
		fixture("operator-v0.10/kubefledgeds-crd.yaml"), filepath.Join(originalChart, "crds", "imagecaches.yaml"))).To(Succeed())
	then := time.Now().Add(-time.Hour).Truncate(time.Second)
	origStatus := originalStatus{status: "Succeeded", reason: "ImageCacheRefresh",
		message: v1alpha2.ImageCacheMessageImagesPulledSuccessfully, started: then, completed: then.Add(5 * time.Second)}
	originalCache(t, g, c, p.ns, "web", []interface{}{list(map[string]string{"kubernetes.io/os": "linux"}, "nginx:1.27.3")}, origStatus)
	createAll(t, g, c, p.ns, fixture("operator-v0.10/operator.yaml"))

	cr := readObject(t, fixture("operator-v0.10/kubefledged.yaml"))
	cr.SetNamespace(p.ns)
	g.Expect(c.Create(ctx, cr)).To(Succeed())
	// What the original operator did with it: its finalizer, the release
	// named after it with its spec as values, a status naming that release.
	cr.SetFinalizers([]string{uninstallFinalizer})
	g.Expect(c.Update(ctx, cr)).To(Succeed())
	spec, _, _ := unstructured.NestedMap(cr.Object, "spec")
	rel := helmInstall(t, g, p.ns, cr.GetName(), originalChart, spec)
	now := metav1.Now().UTC().Format(time.RFC3339)
	cr.Object["status"] = map[string]interface{}{
		"conditions": []interface{}{
			map[string]interface{}{"type": "Initialized", "status": "True", "lastTransitionTime": now},
			map[string]interface{}{"type": "Deployed", "status": "True", "reason": "InstallSuccessful", "lastTransitionTime": now,
				"message": "kube-fledged is deployed"},
		},
		"deployedRelease": map[string]interface{}{"name": rel.Name, "manifest": rel.Manifest},
	}
	g.Expect(c.Status().Update(ctx, cr)).To(Succeed())
	g.Expect(deploymentArgs(g, c, p.ns, p.fullname+"-controller")).To(ContainElement("--image-cache-refresh-frequency=30m"))
	originalWebhookRefuses(g, c, p.ns)
	crSpec := kubeFledgedSpec(g, c, p.ns, cr.GetName())
	g.Expect(crSpec).To(HaveKeyWithValue("validatingWebhookCABundle", BeNil()), "the original's sample carries it, empty")
	cacheSpec, cacheBefore := specOf(g, c, p.ns, "web")
	lap("the original's cluster ready")

	// --- 1. Stop the original operator, keep the resource. ---
	for _, step := range stepsStopOperator {
		p.mustShell(t, step)
	}
	for _, o := range []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: "kubefledged-operator"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: "kubefledged-operator"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "kubefledged-operator"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "kubefledged-operator"}},
	} {
		g.Expect(apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(o), o))).To(BeTrue(), "%T %s is still there", o, o.GetName())
	}

	// --- 2. Remove the original's release, keep its CRD. ---
	removeOriginal(t, g, c, p)
	g.Expect(kubeFledgedSpec(g, c, p.ns, cr.GetName())).To(Equal(crSpec), "the resource is kept")

	// --- 3. Our CRDs over theirs. ---
	p.mustShell(t, stepImageCacheCRD)
	p.mustShell(t, stepKubeFledgedCRD)
	framework.WaitEstablished(g, c, imageCacheCRD, timeout)
	framework.WaitEstablished(g, c, kubeFledgedCRD, timeout)
	ourSchemaServed(g, c, p.ns)
	ourKubeFledgedSchemaServed(g, c, p.ns)
	g.Expect(kubeFledgedSpec(g, c, p.ns, cr.GetName())).To(Equal(crSpec), "the resource reads the same under our CRD")
	checkCaches(t, g, c, p, map[string]bool{key(p.ns, "web"): true})

	// --- 4. Our operator, given the same resource. ---
	runOurOperator(t, g, c, p.ns, cr.GetName())
	u := waitDeployed(g, c, p.ns, cr.GetName())
	_, reason, _ := framework.Condition(u, "Deployed")
	g.Expect(reason).To(Equal("InstallSuccessful"), "our operator installs our chart afresh: the original's release is gone")
	ours := deploymentArgs(g, c, p.ns, "fledged-kubefledged-controller")
	g.Expect(ours).To(ContainElements("--image-cache-refresh-frequency=30m", "--job-retention-policy=retain",
		"--image-pull-deadline-duration=5m", "--image-pull-policy=IfNotPresent"), "the resource's flat args.* keys, mapped")
	ourRel, err := action.NewGet(helmop.HelmConfig(t, p.ns)).Run(p.release)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ourRel.Chart.Metadata.Name).To(Equal("kubefledged"))
	g.Expect(ourRel.Version).To(Equal(1), "a fresh release, not an upgrade of the original's")
	lap("procedure to our release deployed")

	g.Expect(kubeFledgedSpec(g, c, p.ns, cr.GetName())).To(Equal(crSpec), "our operator changed the resource's spec")
	originalGone(t, g, c, p)
	got, after := specOf(g, c, p.ns, "web")
	g.Expect(got).To(Equal(cacheSpec), "the cache's spec")
	g.Expect(after.Object["status"]).To(Equal(cacheBefore.Object["status"]), "the cache's status, which no controller here rewrites")
}

// runOurOperator runs our operator in-process, as test/e2e/operator does,
// until the test ends. Before it stops, the resource is deleted and its
// release uninstalled: its webhook configuration names a Service nothing
// answers on the sandbox and would refuse every ImageCache write after.
func runOurOperator(t *testing.T, g Gomega, c client.Client, ns, name string) {
	t.Helper()
	// Our controller's and our operator's log (both in-process) go beside the sandbox's.
	g.Expect(framework.LogToFile(filepath.Join(sandbox.Get().Dir(), "upgrade.log"))).To(Succeed())
	helmop.RunOperator(t, sandbox.Get().Config(), operator.Options{
		WatchesFile:             filepath.Join(repo, "watches.yaml"),
		Namespace:               ns,
		MetricsAddr:             "0",
		ProbeAddr:               "0",
		MaxConcurrentReconciles: 1,
		MaxReleaseHistory:       3,
	})
	t.Cleanup(func() {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(operator.KubeFledgedGVK)
		u.SetNamespace(ns)
		u.SetName(name)
		if err := c.Delete(context.Background(), u); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting the KubeFledged resource: %v", err)
			return
		}
		NewWithT(t).Eventually(func() bool {
			return apierrors.IsNotFound(c.Get(context.Background(), client.ObjectKeyFromObject(u), u))
		}).WithTimeout(timeout).WithPolling(poll).Should(BeTrue(), "our operator did not uninstall the release")
	})
}

func waitDeployed(g Gomega, c client.Client, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(operator.KubeFledgedGVK)
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u)).To(Succeed())
		st, _, _ := framework.Condition(u, "Deployed")
		g.Expect(st).To(Equal("True"), "status: %v", u.Object["status"])
		rel, _, _ := unstructured.NestedString(u.Object, "status", "deployedRelease", "name")
		g.Expect(rel).To(Equal(name))
		manifest, _, _ := unstructured.NestedString(u.Object, "status", "deployedRelease", "manifest")
		g.Expect(manifest).To(ContainSubstring("name: fledged-kubefledged-controller"), "the status still describes the original's release")
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	return u
}

// kubeFledgedSpec reads a KubeFledged resource's spec as the API serves it.
func kubeFledgedSpec(g Gomega, c client.Client, ns, name string) map[string]interface{} {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(operator.KubeFledgedGVK)
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u)).To(Succeed())
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	return spec
}

// ourKubeFledgedSchemaServed waits until the API server applies our
// KubeFledged CRD's schema: the original's kept any field, ours refuses an
// unknown one under strict field validation. The comparison of the stored
// resource before it would otherwise race the switch.
func ourKubeFledgedSchemaServed(g Gomega, c client.Client, ns string) {
	u := &unstructured.Unstructured{Object: map[string]interface{}{"spec": map[string]interface{}{"notAValue": true}}}
	u.SetGroupVersionKind(operator.KubeFledgedGVK)
	u.SetNamespace(ns)
	u.SetGenerateName("probe-")
	g.Eventually(func() error {
		return c.Create(context.Background(), u.DeepCopy(), client.DryRunAll, client.FieldValidation(metav1.FieldValidationStrict))
	}).WithTimeout(timeout).WithPolling(poll).Should(MatchError(ContainSubstring("notAValue")), "our KubeFledged CRD's schema is not in effect")
}

func readObject(t *testing.T, file string) *unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := utilyaml.Unmarshal(raw, &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// createAll creates every object of a multi-document file, namespaced ones
// in ns, with NAMESPACE in the file replaced by ns.
func createAll(t *testing.T, g Gomega, c client.Client, ns, file string) {
	t.Helper()
	raw, err := os.ReadFile(file)
	g.Expect(err).NotTo(HaveOccurred())
	raw = bytes.ReplaceAll(raw, []byte("NAMESPACE"), []byte(ns))
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return
			}
			t.Fatal(err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if !strings.HasPrefix(u.GetKind(), "Cluster") {
			u.SetNamespace(ns)
		}
		g.Expect(c.Create(context.Background(), u)).To(Succeed(), "%s %s", u.GetKind(), u.GetName())
	}
}
