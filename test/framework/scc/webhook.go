package scc

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/pki"
	"github.com/kubefledged/kube-fledged/test/framework"
)

// Label marks the namespaces the emulation governs. OpenShift governs
// every namespace; here the webhooks are limited to those a test made
// for them, so that the rest of a suite's shared sandbox runs as before,
// and a webhook that is gone cannot refuse another test's pods.
const Label = "scc.test.kubefledged.io/emulated"

// Emulation is the two webhooks, served in the test process.
type Emulation struct {
	kube kubernetes.Interface
	name string
}

// Start serves the webhooks on loopback and registers them with the API
// server of cfg, then waits until a pod created in a governed namespace
// comes back admitted by a constraint: the API server takes up a new
// webhook configuration a moment after it is written. Everything is
// removed when the test ends.
func Start(t testing.TB, cfg *rest.Config) *Emulation {
	t.Helper()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &Emulation{kube: kube, name: "scc-emulation-" + rand.String(5)}
	caPEM, dir := serving(t)
	port := framework.FreePort(t)
	srv := ctrlwebhook.NewServer(ctrlwebhook.Options{Host: "127.0.0.1", Port: port, CertDir: dir})
	srv.Register("/mutate", &admission.Webhook{Handler: handler{e: e, mutate: true}})
	srv.Register("/validate", &admission.Webhook{Handler: handler{e: e}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the SCC emulation's webhook server: %v", err)
		}
	})
	e.register(t, port, caPEM)
	e.waitActive(t)
	return e
}

// serving writes a CA and a serving certificate for 127.0.0.1 where the
// webhook server reads them, and returns the CA the API server must trust.
func serving(t testing.TB) ([]byte, string) {
	t.Helper()
	now := time.Now()
	ca, err := pki.Sign(&x509.Certificate{
		Subject: pkix.Name{CommonName: "scc-emulation-ca"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true,
	}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := pki.Sign(&x509.Certificate{
		Subject: pkix.Name{CommonName: "scc-emulation"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}, ca.Cert, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, data := range map[string][]byte{"tls.crt": leaf.CertPEM, "tls.key": leaf.KeyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return ca.CertPEM, dir
}

// register writes one mutating and one validating webhook for pod creates
// in governed namespaces. Both fail closed, as SCC admission does.
func (e *Emulation) register(t testing.TB, port int, caPEM []byte) {
	t.Helper()
	ctx := context.Background()
	cc := func(path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{URL: ptr.To(fmt.Sprintf("https://127.0.0.1:%d%s", port, path)), CABundle: caPEM}
	}
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
			Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
	}}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{Label: "true"}}
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: e.name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "mutate.scc.test.kubefledged.io", ClientConfig: cc("/mutate"), Rules: rules, NamespaceSelector: selector,
			FailurePolicy: ptr.To(admissionregistrationv1.Fail), SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](10),
			ReinvocationPolicy: ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
		}},
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: e.name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "validate.scc.test.kubefledged.io", ClientConfig: cc("/validate"), Rules: rules, NamespaceSelector: selector,
			FailurePolicy: ptr.To(admissionregistrationv1.Fail), SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](10),
		}},
	}
	ar := e.kube.AdmissionregistrationV1()
	if _, err := ar.MutatingWebhookConfigurations().Create(ctx, mwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ar.ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Registered after the server's stop, so run before it: no governed
	// pod meets a webhook that no longer answers.
	t.Cleanup(func() {
		_ = ar.MutatingWebhookConfigurations().Delete(context.Background(), e.name, metav1.DeleteOptions{})
		_ = ar.ValidatingWebhookConfigurations().Delete(context.Background(), e.name, metav1.DeleteOptions{})
	})
}

// waitActive dry-runs a pod in a governed namespace of its own until it
// comes back with the constraint that admitted it.
func (e *Emulation) waitActive(t testing.TB) {
	t.Helper()
	ns := e.Namespace(t, "scc-probe-", "1000/1000", nil)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe"}, Spec: corev1.PodSpec{
		AutomountServiceAccountToken: ptr.To(false),
		Containers:                   []corev1.Container{{Name: "c", Image: "example.test/probe:1"}},
	}}
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := e.kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			// The namespace's ServiceAccount may not be made yet.
			last = err
			return false, nil
		}
		last = fmt.Errorf("admitted without the emulation's mark: annotations %v", got.Annotations)
		return got.Annotations[AnnotationSCC] == RestrictedV2, nil
	})
	if err != nil {
		t.Fatalf("the SCC emulation did not take effect: %v", last)
	}
}

// Namespace creates a governed namespace named prefix plus a random suffix,
// with uidRange as its OpenShift UID range ("" for none) and more labels,
// and returns its name. It is deleted when the test ends.
func (e *Emulation) Namespace(t testing.TB, prefix, uidRange string, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: prefix + rand.String(6), Labels: map[string]string{Label: "true"}}}
	for k, v := range labels {
		ns.Labels[k] = v
	}
	if uidRange != "" {
		ns.Annotations = map[string]string{jobs.AnnotationUIDRange: uidRange}
	}
	if _, err := e.kube.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.kube.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

// handler answers one phase.
type handler struct {
	e      *Emulation
	mutate bool
}

func (h handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	pod := &corev1.Pod{}
	if err := json.Unmarshal(req.Object.Raw, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	in, err := h.e.input(ctx, req.Namespace, pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	decide := Validate
	if h.mutate {
		decide = Mutate
	}
	d := decide(pod, in)
	if d.Refusal != "" {
		return refused(d.Refusal)
	}
	if !h.mutate {
		return admission.Allowed(d.SCC)
	}
	raw, err := json.Marshal(d.Pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, raw)
}

// refused is a refusal as the API server shows SCC's: Forbidden,
// with the constraints' reasons.
func refused(why string) admission.Response {
	r := admission.Denied(why)
	r.Result.Code = http.StatusForbidden
	r.Result.Reason = metav1.StatusReasonForbidden
	return r
}

// input reads what admission needs besides the pod: the namespace's range
// and whether the pod's ServiceAccount may use the privileged constraint,
// asked of the API server's own authorizer, as OpenShift asks its own.
func (e *Emulation) input(ctx context.Context, namespace string, pod *corev1.Pod) (Input, error) {
	ns, err := e.kube.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	if err != nil {
		return Input{}, err
	}
	in := Input{}
	in.UIDRange, in.HasUIDRange = ns.Annotations[jobs.AnnotationUIDRange]
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	sar, err := e.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   "system:serviceaccount:" + namespace + ":" + sa,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: namespace, Verb: "use", Group: privilegedGroup, Resource: sccResource, Name: Privileged,
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return Input{}, err
	}
	in.MayPrivilege = sar.Status.Allowed
	return in, nil
}

// GrantPrivileged lets a ServiceAccount of a namespace use the privileged
// constraint, as `oc adm policy add-scc-to-user privileged -z` does, by a
// Role and RoleBinding in that namespace.
func GrantPrivileged(t testing.TB, c client.Client, namespace, serviceAccount string) {
	t.Helper()
	ctx := context.Background()
	name := "use-scc-privileged-" + serviceAccount
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{privilegedGroup}, Resources: []string{sccResource}, ResourceNames: []string{Privileged}, Verbs: []string{"use"},
	}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: serviceAccount, Namespace: namespace}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}
