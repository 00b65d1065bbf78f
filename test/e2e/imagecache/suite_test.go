// Package imagecache_test runs the ImageCache controller in-process against
// the sandbox's real control plane (etcd, kube-apiserver, kcm, scheduler, and
// kwok nodes) and checks each operation end to end.
package imagecache_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/commands"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/webhook"
	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

var (
	k8s  client.WithWatch
	kube kubernetes.Interface
)

const nodes = 3

// The nodes report the images their pods pulled, as kubelets do: a refresh
// then meets a warm cluster, as it would on a user's.
func TestMain(m *testing.M) {
	sandbox.Main(m, sandbox.Options{Nodes: nodes, ReportImages: true})
}

// The controller serves its validating webhook in every test, as in
// production: the API server calls it for every ImageCache write (but in
// namespaces labelled noWebhookLabel, which stand for a cluster where the
// webhook is off). Its port, certificate directory and Secret outlive each
// controller, so that the next one takes the certificate over.
const (
	controllerNamespace = "kube-fledged"
	webhookConfig       = "validate-image-cache.kubefledged.io-e2e"
	noWebhookLabel      = "e2e.kubefledged.io/no-webhook"
)

var webhookPort int

var setupOnce sync.Once

// env connects to the sandbox and installs the CRD, once per package.
func env(t *testing.T) {
	t.Helper()
	setupOnce.Do(func() {
		if err := framework.LogToFile(filepath.Join(sandbox.Get().Dir(), "controller.log")); err != nil {
			panic(err)
		}
		var err error
		if k8s, kube, err = framework.Connect(sandbox.Get().Config()); err != nil {
			panic(err)
		}
		if err := framework.InstallCRDs(context.Background(), sandbox.Get().Config(), framework.ImageCacheCRD); err != nil {
			panic(fmt.Sprintf("installing the CRD: %v", err))
		}
		if err := installWebhook(context.Background()); err != nil {
			panic(fmt.Sprintf("installing the webhook configuration: %v", err))
		}
	})
}

// installWebhook creates the controller's namespace and a webhook
// configuration that calls the controller on 127.0.0.1, with the placeholder
// CA bundle the chart ships: the controller's certificate keeper fills it.
func installWebhook(ctx context.Context) error {
	var err error
	if webhookPort, err = sandbox.FreePort(); err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: controllerNamespace}}
	if err := k8s.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: webhookConfig},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "validate-image-cache.kubefledged.io",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				URL:      ptr.To(fmt.Sprintf("https://127.0.0.1:%d%s", webhookPort, webhook.Path)),
				CABundle: []byte("Cg=="),
			},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{v1alpha2.GroupVersion.Group}, APIVersions: []string{v1alpha2.GroupVersion.Version},
					Resources: []string{"imagecaches"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
			}},
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: noWebhookLabel, Operator: metav1.LabelSelectorOpDoesNotExist}}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](10),
		}},
	}
	if err := k8s.Create(ctx, vwc); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// pullDeadline is the suite's --image-pull-deadline-duration. A good image's
// pull must finish within it: the Job controller creates the pod, the scheduler
// binds it, kwok runs it and the controller reads it, each a process of its own,
// which a CI machine with both cores busy slows many times over (the Job
// controller alone once took over 30 s for a pod). 8 s lost that race under
// load; 20 s is what a hanging image costs each test that waits for one.
const pullDeadline = 20 * time.Second

// actsWhileHanging is the pull deadline of a test that acts while a pull
// that never ends keeps an operation running, and then waits for the
// operation to end at that deadline. What such a test does meanwhile can
// take longer than the suite's 20 s on a loaded machine (the Job
// controller alone once took over 30 s for a pod); a deadline as long as
// the tests' own 5-minute bound would add minutes to each of them, as they
// end at it.
func actsWhileHanging(o *commands.ControllerOptions) { o.Deadline.Value = time.Minute }

// runController starts the controller in-process with test-sized timings and
// returns a function that stops it (and is also run at the test's end).
func runController(t *testing.T, mod func(o *commands.ControllerOptions)) (stop func()) {
	t.Helper()
	o := controllerOptions(t, mod)
	stop = framework.RunController(t, sandbox.Get().Config(), o)
	if o.Webhook.Enable {
		waitWebhook(t)
	}
	return stop
}

// controllerOptions are the suite's controller flags, changed by mod.
func controllerOptions(t *testing.T, mod func(o *commands.ControllerOptions)) *commands.ControllerOptions {
	t.Helper()
	env(t)
	o := commands.NewControllerOptions()
	o.LeaderElect = false
	fs := flag.NewFlagSet("controller", flag.ContinueOnError)
	o.BindFlags(fs) // the webhook's defaults, as the binary has them
	o.Webhook.Port = webhookPort
	o.Webhook.CertDir = filepath.Join(sandbox.Get().Dir(), "webhook-certs")
	o.Webhook.Namespace = controllerNamespace
	o.Webhook.ConfigurationName = webhookConfig
	o.Webhook.ExtraHosts = []string{"127.0.0.1"}
	o.MetricsAddr, o.ProbeAddr = "0", "0"
	o.Deadline.Value = pullDeadline
	o.RefreshEvery.Value = 0
	o.HelperImage = "example.test/kubefledged:e2e"
	if granularityErr != nil {
		t.Fatalf("E2E_PULL_JOB_GRANULARITY: %v", granularityErr)
	}
	o.Granularity = granularity
	if mod != nil {
		mod(o)
	}
	return o
}

// waitWebhook waits until the API server admits ImageCaches through the
// controller's webhook: a dry-run create passes only once the webhook
// answers over TLS that the configuration's bundle trusts.
func waitWebhook(t *testing.T) {
	t.Helper()
	probe := newCache("default", "webhook-probe", list("nginx:1.27"))
	NewWithT(t).Eventually(func() error {
		return k8s.Create(context.Background(), probe.DeepCopy(), client.DryRunAll)
	}).WithTimeout(framework.ClusterTimeout).WithPolling(200 * time.Millisecond).Should(Succeed())
}

// namespace creates a namespace for one test and deletes its caches (and
// so, through owner references, their Jobs) at the end. The sandbox's own
// nodes start each test holding no image: tests share them, and what one
// test pulled would otherwise be already present in the next.
func namespace(t *testing.T, labels ...string) string {
	t.Helper()
	env(t)
	for i := 0; i < nodes; i++ {
		if err := sandbox.Get().SetNodeImages(context.Background(), fmt.Sprintf("sandbox-node-%d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	ns := framework.Namespace(t, k8s, "e2e-", labels...)
	t.Cleanup(func() {
		_ = k8s.DeleteAllOf(context.Background(), &v1alpha2.ImageCache{}, client.InNamespace(ns))
	})
	return ns
}

func newCache(ns, name string, lists ...v1alpha2.CacheSpecImages) *v1alpha2.ImageCache {
	return &v1alpha2.ImageCache{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha2.ImageCacheSpec{CacheSpec: lists},
	}
}

func list(images ...string) v1alpha2.CacheSpecImages { return v1alpha2.CacheSpecImages{Images: images} }

// granularity is the controller's --pull-job-granularity in this run of the
// suite: E2E_PULL_JOB_GRANULARITY, else the flag's default. `make test`
// runs the suite once with each. A value the flag would refuse fails every
// test that starts the controller.
var granularity, granularityErr = func() (jobs.Granularity, error) {
	if v := os.Getenv("E2E_PULL_JOB_GRANULARITY"); v != "" {
		return jobs.ParseGranularity(v)
	}
	return commands.NewControllerOptions().Granularity, nil
}()

// perNode says whether pulls run in node Jobs in this run.
func perNode() bool { return granularity == jobs.PerNode }

func jobsOf(g Gomega, ns string, labels client.MatchingLabels) []batchv1.Job {
	l := &batchv1.JobList{}
	g.Expect(k8s.List(context.Background(), l, client.InNamespace(ns), labels)).To(Succeed())
	return l.Items
}

func allNodes() []string {
	var out []string
	for i := 0; i < nodes; i++ {
		out = append(out, fmt.Sprintf("sandbox-node-%d", i))
	}
	return out
}

func each(kind, image string, nodeNames ...string) []string {
	var out []string
	for _, n := range nodeNames {
		out = append(out, kind+" "+image+" "+n)
	}
	return out
}

// labelNodes sets a label on every node of the sandbox for the rest of the
// test: the nodes are shared, so the test's end takes it off again.
func labelNodes(t *testing.T, g Gomega, key, value string) {
	t.Helper()
	set := func(name string, value *string) error {
		n := &corev1.Node{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Name: name}, n); err != nil {
			return err
		}
		patch := client.MergeFrom(n.DeepCopy())
		if value == nil {
			delete(n.Labels, key)
		} else {
			n.Labels[key] = *value
		}
		return k8s.Patch(context.Background(), n, patch)
	}
	for _, name := range allNodes() {
		g.Expect(set(name, &value)).To(Succeed())
		t.Cleanup(func() { _ = set(name, nil) })
	}
}
