// Package operator_test runs the KubeFledged operator in-process against the
// sandbox's real control plane and checks what users do with it: create the
// sample CR, change it, get refused a bad value, delete it, and get the same
// controller Deployment from `helm install` and from a CR written for the
// original kube-fledged.
package operator_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/strvals"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	"github.com/kubefledged/kube-fledged/internal/operator"
	"github.com/kubefledged/kube-fledged/internal/pki"
	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/framework/helmop"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

func TestMain(m *testing.M) {
	sandbox.Main(m, sandbox.Options{Nodes: 1})
}

const (
	// The sample CR's name, hence the release's and the objects' prefix.
	release = "kubefledged"
	// A release normally lands in a few seconds; on two cores shared with
	// other packages' sandboxes it has taken past a minute.
	timeout = framework.ClusterTimeout
	poll    = 250 * time.Millisecond
)

var (
	repo = filepath.Join("..", "..", "..")
	k8s  client.Client
)

func newClient(t *testing.T) client.Client {
	t.Helper()
	c, err := client.New(sandbox.Get().Config(), client.Options{Scheme: framework.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func namespace(t *testing.T) string {
	t.Helper()
	ns := "op-" + utilrand.String(6)
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	return ns
}

// startOperator runs operator.Run, its own namespace ns, until the test ends
// and checks it stops cleanly.
func startOperator(t *testing.T, ns string) {
	t.Helper()
	if testing.Verbose() {
		ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true)))
	} else {
		ctrl.SetLogger(zap.New(zap.WriteTo(&bytes.Buffer{})))
	}
	helmop.RunOperator(t, sandbox.Get().Config(), operator.Options{
		WatchesFile:             filepath.Join(repo, "watches.yaml"),
		Namespace:               ns,
		LeaderElect:             false,
		MetricsAddr:             "0",
		ProbeAddr:               "0",
		MaxConcurrentReconciles: 2,
		MaxReleaseHistory:       3,
	})
}

func kubeFledged(ns, name string, spec map[string]interface{}) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{"spec": spec}}
	u.SetGroupVersionKind(operator.KubeFledgedGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func specOf(t *testing.T, s string) map[string]interface{} {
	t.Helper()
	m := map[string]interface{}{}
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// controllerDeployment waits for the release's controller Deployment to
// carry the given --job-retention-policy and returns it.
func controllerDeployment(g Gomega, ns, policy string) *appsv1.Deployment {
	d := &appsv1.Deployment{}
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: release + "-controller"}, d)).To(Succeed())
		g.Expect(d.Spec.Template.Spec.Containers).To(HaveLen(1))
		g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--job-retention-policy=" + policy))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	return d
}

func waitDeployed(g Gomega, key client.ObjectKey) *unstructured.Unstructured {
	u := kubeFledged(key.Namespace, key.Name, nil)
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), key, u)).To(Succeed())
		st, _, _ := framework.Condition(u, "Deployed")
		g.Expect(st).To(Equal("True"), "status: %v", u.Object["status"])
		name, _, _ := unstructured.NestedString(u.Object, "status", "deployedRelease", "name")
		g.Expect(name).To(Equal(key.Name))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	return u
}

// deleteAndWaitUninstalled deletes a CR and waits until it and its release
// are gone, cluster-scoped objects included.
func deleteAndWaitUninstalled(g Gomega, ns string) {
	u := kubeFledged(ns, release, nil)
	g.Expect(k8s.Delete(context.Background(), u)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(context.Background(), client.ObjectKeyFromObject(u), u))
	}).WithTimeout(timeout).WithPolling(poll).Should(BeTrue(), "the CR is not gone: finalizer not removed")
	waitReleaseGone(g, ns)
}

func waitReleaseGone(g Gomega, ns string) {
	g.Eventually(func(g Gomega) {
		for _, o := range []client.Object{
			&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: release + "-controller"}},
			&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: release + "-webhook"}},
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: release + "-controller"}},
			&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: release + "-controller"}},
			&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: release}},
		} {
			err := k8s.Get(context.Background(), client.ObjectKeyFromObject(o), o)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s still there (%v)", o, o.GetName(), err)
		}
		secrets := &corev1.SecretList{}
		g.Expect(k8s.List(context.Background(), secrets, client.InNamespace(ns), client.MatchingLabels{"owner": "helm", "name": release})).To(Succeed())
		g.Expect(secrets.Items).To(BeEmpty(), "Helm release records remain")
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

// injectCABundle does what the controller does in self mode.
func injectCABundle(t *testing.T, g Gomega, bundle []byte) {
	t.Helper()
	patch := fmt.Sprintf(`[{"op":"add","path":"/webhooks/0/clientConfig/caBundle","value":%q}]`,
		base64.StdEncoding.EncodeToString(bundle))
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: release}}
	g.Expect(k8s.Patch(context.Background(), vwc, client.RawPatch(types.JSONPatchType, []byte(patch)))).To(Succeed())
}

func caBundle(g Gomega) []byte {
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Name: release}, vwc)).To(Succeed())
	g.Expect(vwc.Webhooks).To(HaveLen(1))
	return vwc.Webhooks[0].ClientConfig.CABundle
}

func selfSignedPEM(t *testing.T) []byte {
	t.Helper()
	ca, err := pki.Sign(&x509.Certificate{Subject: pkix.Name{CommonName: "kubefledged-test-ca"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ca.CertPEM
}

// helmValues parses --set style values.
func helmValues(t *testing.T, sets ...string) map[string]interface{} {
	t.Helper()
	vals := map[string]interface{}{}
	for _, s := range sets {
		if err := strvals.ParseInto(s, vals); err != nil {
			t.Fatal(err)
		}
	}
	return vals
}

// sameDeployment compares what users care about: the whole spec.
func sameDeployment(g Gomega, got, want *appsv1.Deployment, what string) {
	g.Expect(got.Spec.Template.Spec.Containers[0].Args).To(Equal(want.Spec.Template.Spec.Containers[0].Args), "%s: args", what)
	g.Expect(got.Spec).To(Equal(want.Spec), "%s: Deployment spec", what)
}

func TestOperator(t *testing.T) {
	g := NewWithT(t)
	k8s = newClient(t)
	g.Expect(framework.InstallCRDs(context.Background(), sandbox.Get().Config(), framework.KubeFledgedCRD, framework.ImageCacheCRD)).To(Succeed())
	ns := namespace(t)
	startOperator(t, ns)
	key := client.ObjectKey{Namespace: ns, Name: release}
	var byOperator *appsv1.Deployment
	bundle := selfSignedPEM(t)

	t.Run("sample CR deploys the controller with delete", func(t *testing.T) {
		g := NewWithT(t)
		begin := time.Now()
		kf, err := framework.SampleKubeFledged(ns)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(k8s.Create(context.Background(), kf)).To(Succeed())
		d := controllerDeployment(g, ns, "delete")
		g.Expect(d.Spec.Template.Spec.Containers[0].Args[0]).To(Equal("controller"))
		g.Expect(d.Spec.Template.Spec.ServiceAccountName).To(Equal(release + "-controller"))
		u := waitDeployed(g, key)
		_, reason, _ := framework.Condition(u, "Deployed")
		g.Expect(reason).To(Equal("InstallSuccessful"))
		g.Expect(u.GetFinalizers()).To(ContainElement("uninstall-helm-release"))
		// Self mode renders no caBundle; the controller would inject one.
		g.Expect(caBundle(g)).To(BeEmpty())
		// The printer columns, as `kubectl get` shows them.
		if out, ok := framework.Kubectl(t, "-n", ns, "get", "kubefledgeds", "-o", "wide"); ok {
			g.Expect(out).To(MatchRegexp(`NAME\s+DEPLOYED\s+REASON\s+FAILED\s+RELEASE\s+AGE`))
			g.Expect(out).To(MatchRegexp(`kubefledged\s+True\s+InstallSuccessful\s+False\s+kubefledged\s+`))
		}
		t.Logf("sample CR deployed in %s", time.Since(begin).Round(time.Millisecond))
	})

	// Each refused in its status, with no controller installed from it, and
	// deleted as any other.
	refused := func(t *testing.T, cr *unstructured.Unstructured, controller, want string) {
		g := NewWithT(t)
		g.Expect(k8s.Create(context.Background(), cr)).To(Succeed())
		g.Eventually(func(g Gomega) {
			g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(cr), cr)).To(Succeed())
			st, reason, msg := framework.Condition(cr, "Irreconcilable")
			g.Expect(st).To(Equal("True"), "status: %v", cr.Object["status"])
			g.Expect(reason).To(Equal("ErrorGettingValues"))
			g.Expect(msg).To(ContainSubstring(want))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		g.Expect(apierrors.IsNotFound(k8s.Get(context.Background(),
			client.ObjectKey{Namespace: cr.GetNamespace(), Name: controller}, &appsv1.Deployment{}))).To(BeTrue(), "the refused CR installed a controller")
		g.Expect(k8s.Delete(context.Background(), cr)).To(Succeed())
		g.Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(context.Background(), client.ObjectKeyFromObject(cr), cr))
		}).WithTimeout(timeout).WithPolling(poll).Should(BeTrue(), "the refused CR could not be deleted")
	}

	t.Run("a second KubeFledged in the operator's namespace is refused in its status", func(t *testing.T) {
		second, err := framework.SampleKubeFledged(ns)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		second.SetName("second")
		refused(t, second, "second-kubefledged-controller", "kube-fledged is already installed in this cluster by KubeFledged "+ns+"/"+release)
	})

	// Under OLM a namespace editor may write a KubeFledged (aggregated
	// roles); its values would choose what runs as root on the nodes.
	t.Run("a KubeFledged in another namespace is ignored in its status", func(t *testing.T) {
		other := namespace(t)
		tenant, err := framework.SampleKubeFledged(other)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		refused(t, tenant, release+"-controller", "ignored: the operator installs kube-fledged only from a KubeFledged in its own namespace, "+
			ns+", not from one in "+other)
	})

	t.Run("editing the CR to retain updates the args and keeps the injected caBundle", func(t *testing.T) {
		g := NewWithT(t)
		injectCABundle(t, g, bundle)
		begin := time.Now()
		u := kubeFledged(ns, release, nil)
		g.Expect(k8s.Get(context.Background(), key, u)).To(Succeed())
		g.Expect(unstructured.SetNestedField(u.Object, "retain", "spec", "controller", "jobRetentionPolicy")).To(Succeed())
		g.Expect(k8s.Update(context.Background(), u)).To(Succeed())
		byOperator = controllerDeployment(g, ns, "retain")
		g.Expect(byOperator.Spec.Template.Spec.Containers[0].Args).NotTo(ContainElement("--job-retention-policy=delete"))
		g.Eventually(func(g Gomega) {
			g.Expect(k8s.Get(context.Background(), key, u)).To(Succeed())
			_, reason, _ := framework.Condition(u, "Deployed")
			g.Expect(reason).To(Equal("UpgradeSuccessful"))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		t.Logf("upgrade seen in %s", time.Since(begin).Round(time.Millisecond))
		// The upgrade and the reconciles after it (the VWC is a watched
		// dependent) must leave the controller's caBundle alone.
		g.Consistently(func(g Gomega) {
			g.Expect(caBundle(g)).To(Equal(bundle))
		}).WithTimeout(3 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	})

	t.Run("an invalid value is refused at admission", func(t *testing.T) {
		g := NewWithT(t)
		u := kubeFledged(ns, release, nil)
		g.Expect(k8s.Get(context.Background(), key, u)).To(Succeed())
		g.Expect(unstructured.SetNestedField(u.Object, "keep", "spec", "controller", "jobRetentionPolicy")).To(Succeed())
		err := k8s.Update(context.Background(), u)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "update with keep: %v", err)
		g.Expect(err.Error()).To(ContainSubstring(`spec.controller.jobRetentionPolicy: Unsupported value: "keep": supported values: "delete", "retain"`))

		err = k8s.Create(context.Background(), kubeFledged(ns, "other", specOf(t, "args: {controllerJobRetentionPolicy: keep}")))
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "create with legacy keep: %v", err)
		g.Expect(err.Error()).To(ContainSubstring("spec.args.controllerJobRetentionPolicy"))

		err = k8s.Create(context.Background(), kubeFledged(ns, "typo", specOf(t, "controller: {jobRetentionPolcy: retain}")),
			&client.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
		g.Expect(err).To(HaveOccurred(), "an unknown field was accepted")
		g.Expect(err.Error()).To(ContainSubstring("jobRetentionPolcy"))

		// The release is unchanged.
		controllerDeployment(g, ns, "retain")
	})

	t.Run("deleting the CR uninstalls the release", func(t *testing.T) {
		g := NewWithT(t)
		begin := time.Now()
		deleteAndWaitUninstalled(g, ns)
		t.Logf("uninstalled in %s", time.Since(begin).Round(time.Millisecond))
	})

	t.Run("helm install --set controller.jobRetentionPolicy=retain gives the same Deployment", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(byOperator).NotTo(BeNil(), "needs the operator's Deployment from the steps above")
		chrt, err := loader.Load(filepath.Join(repo, "helm-charts", "kubefledged"))
		g.Expect(err).NotTo(HaveOccurred())
		cfg := helmop.HelmConfig(t, ns)
		install := action.NewInstall(cfg)
		install.ReleaseName = release
		install.Namespace = ns
		install.Timeout = timeout
		_, err = install.Run(chrt, helmValues(t, "controller.jobRetentionPolicy=retain"))
		g.Expect(err).NotTo(HaveOccurred())
		sameDeployment(g, controllerDeployment(g, ns, "retain"), byOperator, "helm install")

		// helm upgrade keeps the caBundle the controller injected: the chart
		// never renders the field, so the three-way merge leaves it be.
		injectCABundle(t, g, bundle)
		upgrade := action.NewUpgrade(cfg)
		upgrade.Namespace = ns
		upgrade.Timeout = timeout
		_, err = upgrade.Run(release, chrt, helmValues(t, "controller.jobRetentionPolicy=delete"))
		g.Expect(err).NotTo(HaveOccurred())
		controllerDeployment(g, ns, "delete")
		g.Expect(caBundle(g)).To(Equal(bundle), "helm upgrade reset the caBundle")

		_, err = action.NewUninstall(cfg).Run(release)
		g.Expect(err).NotTo(HaveOccurred())
		waitReleaseGone(g, ns)
	})

	t.Run("an upstream-style CR gives the same Deployment", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(byOperator).NotTo(BeNil(), "needs the operator's Deployment from the steps above")
		// The original's sample CR (charts.helm.kubefledged.io_v1alpha2_kubefledged_cr.yaml),
		// with retention set the original's way.
		spec := specOf(t, `
controllerReplicaCount: 1
webhookServerReplicaCount: 1
image:
  kubefledgedControllerRepository: docker.io/senthilrch/kubefledged-controller
  kubefledgedCRIClientRepository: docker.io/senthilrch/kubefledged-cri-client
  kubefledgedWebhookServerRepository: docker.io/senthilrch/kubefledged-webhook-server
  pullPolicy: Always
args:
  controllerLogLevel: INFO
  controllerImagePullDeadlineDuration: 5m
  controllerImageCacheRefreshFrequency: 15m
  controllerImagePullPolicy: IfNotPresent
  controllerJobRetentionPolicy: retain
  webhookServerLogLevel: INFO
  webhookServerCertFile: /var/run/secrets/webhook-server/tls.crt
  webhookServerKeyFile: /var/run/secrets/webhook-server/tls.key
  webhookServerPort: 443
nameOverride: ""
fullnameOverride: ""
`)
		g.Expect(k8s.Create(context.Background(), kubeFledged(ns, release, spec), &client.CreateOptions{FieldValidation: metav1.FieldValidationStrict})).To(Succeed())
		d := controllerDeployment(g, ns, "retain")
		waitDeployed(g, key)
		// Only what the CR sets differently from the sample: the pull policy
		// of the controller's own image.
		g.Expect(d.Spec.Template.Spec.Containers[0].ImagePullPolicy).To(Equal(corev1.PullAlways))
		d = d.DeepCopy()
		d.Spec.Template.Spec.Containers[0].ImagePullPolicy = byOperator.Spec.Template.Spec.Containers[0].ImagePullPolicy
		sameDeployment(g, d, byOperator, "upstream-style CR")
		deleteAndWaitUninstalled(g, ns)
	})
}
