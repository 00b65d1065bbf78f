package upgrade_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/action"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/images"
	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/framework/helmop"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// The steps of docs/install.md that both cases run, word for word.
const (
	stepUninstall     = `helm uninstall "$RELEASE" -n "$NS" --wait`
	stepDeleteWebhook = `kubectl delete validatingwebhookconfiguration "$FULLNAME-webhook-server" --ignore-not-found`
	stepDeleteDeploys = `kubectl delete deployment "$FULLNAME-controller" "$FULLNAME-webhook-server" -n "$NS" --ignore-not-found`
	stepNothingLeft   = `kubectl get deployments,services,validatingwebhookconfigurations -n "$NS" -l app.kubernetes.io/instance="$RELEASE"`
	stepImageCacheCRD = `kubectl apply --server-side --force-conflicts -f helm-charts/kubefledged/crds/`
	stepCheckCaches   = `kubectl get imagecaches -A -o json \
  | jq '.items |= map({apiVersion, kind, metadata: {namespace: .metadata.namespace, generateName: (.metadata.name + "-")}, spec})' \
  | kubectl create --dry-run=server -o name -f -`
	stepListCaches = `kubectl get ic -A`
	stepListJobs   = `kubectl get jobs -A -l app=kubefledged,kubefledged=kubefledged-image-manager`
	stepWebhooks   = `kubectl get validatingwebhookconfigurations -o name | grep fledged`
)

// The Helm case only.
const (
	stepSaveValues = `helm get values "$RELEASE" -n "$NS" -o yaml > original-values.yaml`
	stepInstall    = `helm install "$RELEASE" helm-charts/kubefledged -n "$NS" -f original-values.yaml`
)

// TestFromHelmRelease upgrades an original installed with its Helm chart,
// with a values file in its own keys, in the middle of an operation, on
// nodes that already hold most of what its caches list.
//
// The caches:
//   - web (kube-fledged): Succeeded, its two images on both nodes.
//   - models (ml): left Processing by the original, which had pulled
//     busybox onto sandbox-node-0 (its Job still there) and not yet onto
//     sandbox-node-1.
//   - gpu (kube-fledged): a list of 257 images, over our CRD's bound of
//     256, for a node pool scaled to zero: the original reported
//     NoImagesPulledOrDeleted.
//
// So the only pull the upgrade may cause is busybox onto sandbox-node-1.
func TestFromHelmRelease(t *testing.T) {
	g := NewWithT(t)
	c, kube := framework.Clients(t)
	ctx := context.Background()
	p := procedure{ns: "kube-fledged", release: "kube-fledged", fullname: "kube-fledged"}

	// --- The cluster as the original left it. ---
	lap := freshCluster(t, g, c, p.ns, "ml")
	warm := []string{"nginx:1.27.3", "redis:7.4.1"}
	for _, n := range []string{"sandbox-node-0", "sandbox-node-1"} {
		g.Expect(sandbox.Get().SetNodeImages(ctx, n, kubeletImages(warm...))).To(Succeed())
	}
	// The CRD comes with the chart (crds/); created first, so that the
	// caches are written before the original's webhook, which refuses
	// everything on this sandbox, exists. Helm then leaves it be.
	g.Expect(framework.CreateCRDs(ctx, sandbox.Get().Config(), filepath.Join(originalChart, "crds", "imagecaches.yaml"))).To(Succeed())
	then := time.Now().Add(-time.Hour).Truncate(time.Second)
	origSucceeded := originalStatus{status: "Succeeded", reason: "ImageCacheCreate",
		message: v1alpha2.ImageCacheMessageImagesPulledSuccessfully, started: then, completed: then.Add(20 * time.Second)}
	web := originalCache(t, g, c, p.ns, "web", []interface{}{list(nil, warm...)}, origSucceeded)
	models := originalCache(t, g, c, "ml", "models", []interface{}{list(nil, "redis:7.4.1", "busybox:1.36.1")},
		originalStatus{status: "Processing", reason: "ImageCacheUpdate", message: v1alpha2.ImageCacheMessageUpdatingCache, started: time.Now().Truncate(time.Second)})
	var many []string
	for i := 0; i < 257; i++ {
		many = append(many, fmt.Sprintf("registry.example.com/ml/model-%03d:v1", i))
	}
	gpu := originalCache(t, g, c, p.ns, "gpu", []interface{}{list(map[string]string{"pool": "gpu"}, many...)},
		originalStatus{status: "NoImagesPulledOrDeleted", reason: "ImageCacheRefresh", message: v1alpha2.ImageCacheMessageNoImagesPulledOrDeleted,
			started: then, completed: then})
	leftover := originalJob(t, g, c, models, "busybox:1.36.1", "sandbox-node-0")
	busybox, err := images.Parse("busybox:1.36.1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		j := &batchv1.Job{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(leftover), j)).To(Succeed())
		g.Expect(j.Status.Succeeded).To(BeEquivalentTo(1))
		n := &corev1.Node{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: "sandbox-node-0"}, n)).To(Succeed())
		g.Expect(images.PresentOn(n, busybox)).To(BeTrue(), "sandbox-node-0 does not report busybox yet")
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	userValues := readValues(t, fixture("original-values.yaml"))
	helmInstall(t, g, p.ns, p.release, originalChart, userValues)
	g.Expect(deploymentArgs(g, c, p.ns, "kube-fledged-controller")).To(ContainElement("--image-cache-refresh-frequency=20m"))
	originalWebhookRefuses(g, c, p.ns)
	specs := map[string]map[string]interface{}{}
	for _, u := range []*unstructured.Unstructured{web, models, gpu} {
		specs[key(u.GetNamespace(), u.GetName())], _ = specOf(g, c, u.GetNamespace(), u.GetName())
	}
	lap("the original's cluster ready")

	// --- 1. Keep the settings. ---
	p.documented(t, stepSaveValues)
	saved, err := action.NewGetValues(helmop.HelmConfig(t, p.ns)).Run(p.release)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(saved).To(Equal(userValues), "helm get values gives back the user's file, keys of no use here included")
	raw, err := yaml.Marshal(saved)
	g.Expect(err).NotTo(HaveOccurred())
	valuesFile := filepath.Join(t.TempDir(), "original-values.yaml")
	g.Expect(os.WriteFile(valuesFile, raw, 0o600)).To(Succeed())

	// --- 2. Remove the original's release, keep its CRD. ---
	removeOriginal(t, g, c, p)
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(leftover), &batchv1.Job{})).To(Succeed(),
		"the original's Job outlives its release: our controller's clean-up is what removes it")

	// --- 3. Our CRD over theirs. ---
	p.mustShell(t, stepImageCacheCRD)
	crd := framework.WaitEstablished(g, c, imageCacheCRD, timeout)
	g.Expect(crd.Spec.Versions[0].Subresources).NotTo(BeNil())
	g.Expect(crd.Spec.Versions[0].Subresources.Status).NotTo(BeNil(), "our CRD adds the status subresource")
	ourSchemaServed(g, c, p.ns)
	for k, want := range specs {
		got, _ := specOf(g, c, namespaceOf(k), nameOf(k))
		g.Expect(got).To(Equal(want), "%s: spec changed by our CRD", k)
	}
	// The printer columns show the original's status at once.
	out := p.mustShell(t, stepListCaches)
	g.Expect(out).To(MatchRegexp(`kube-fledged\s+web\s+Succeeded\s+ImageCacheCreate\s`))
	g.Expect(out).To(MatchRegexp(`ml\s+models\s+Processing\s+ImageCacheUpdate\s`))
	// The check finds the one cache over our bounds, and only it.
	checkCaches(t, g, c, p, map[string]bool{"kube-fledged/web": true, "ml/models": true, "kube-fledged/gpu": false})

	// --- 4. Ours, with the same values file. ---
	p.documented(t, stepInstall)
	helmInstall(t, g, p.ns, p.release, filepath.Join(repo, "helm-charts", "kubefledged"), readValues(t, valuesFile))
	t.Cleanup(func() {
		// Our release's webhook configuration must not outlive this
		// test's controller, nor its names the next case's.
		u := action.NewUninstall(helmop.HelmConfig(t, p.ns))
		u.Wait, u.Timeout = true, timeout
		if _, err := u.Run(p.release); err != nil {
			t.Errorf("uninstalling our release: %v", err)
		}
	})
	ours := &appsv1.Deployment{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: p.ns, Name: "kube-fledged-kubefledged-controller"}, ours)).To(Succeed())
	g.Expect(ours.Spec.Template.Spec.Containers[0].Args).To(ContainElements(
		"--image-cache-refresh-frequency=20m", "--image-pull-deadline-duration=3m",
		"--image-pull-policy=IfNotPresent", "--job-retention-policy=delete"))
	jobLog := framework.RecordJobs(t, kube, "", nil)
	seen := func() []string { return jobsSeen(jobLog) }
	statuses := recordStatuses(t, c)
	runOurs(t, g, c, ours)
	ourWebhookAdmits(g, c, p.ns)

	// --- 5. What happens. ---
	w := settled(g, c, p.ns, "web")
	g.Expect(w.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	g.Expect(w.Status.Reason).To(Equal(v1alpha2.ImageCacheReasonImageCacheRefresh), "the original's cache is taken over by the refresh at start-up")
	g.Expect(w.Status.Message).To(Equal(v1alpha2.ImageCacheMessageImagesPulledSuccessfully))
	g.Expect(w.Status.Counts).NotTo(BeNil())
	g.Expect(w.Status.Counts.AlreadyPresent).To(BeEquivalentTo(4), "both images on both nodes")
	g.Expect(w.Status.ObservedGeneration).To(Equal(w.Generation))

	m := settled(g, c, "ml", "models")
	g.Expect(statuses.of(g, m)).To(ContainElement("Aborted/"+v1alpha2.ImageCacheReasonImagePullAborted),
		"the cache the original left Processing is aborted first")
	g.Expect(m.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	g.Expect(m.Status.Reason).To(Equal(v1alpha2.ImageCacheReasonImageCacheCreate))
	g.Expect(m.Status.Message).To(Equal(v1alpha2.ImageCacheMessageImagesPulledSuccessfully))
	g.Expect(m.Status.Counts).NotTo(BeNil())
	g.Expect(m.Status.Counts.AlreadyPresent).To(BeEquivalentTo(3))
	g.Expect(m.Status.Counts.Succeeded).To(BeEquivalentTo(1))

	gp := settled(g, c, p.ns, "gpu")
	g.Expect(gp.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusNoImagesPulledOrDeleted))
	g.Expect(gp.Status.Reason).To(Equal(v1alpha2.ImageCacheReasonImageCacheRefresh))

	// Nothing pulled twice: one Job, for the one pair the original had
	// not done, created after the original's leftover Job was deleted, and
	// deleted once done (--job-retention-policy=delete, from the values).
	wantJobs := []string{
		"deleted " + key(leftover.Namespace, leftover.Name),
		"created pull busybox:1.36.1 sandbox-node-1",
		"deleted pull busybox:1.36.1 sandbox-node-1",
	}
	g.Eventually(seen).WithTimeout(timeout).WithPolling(poll).Should(ContainElement(wantJobs[0]),
		"our start-up clean-up did not delete the original's leftover Job")
	g.Eventually(seen).WithTimeout(timeout).WithPolling(poll).Should(HaveLen(len(wantJobs)))
	g.Consistently(seen).WithTimeout(2*time.Second).WithPolling(poll).Should(Equal(wantJobs), "Jobs created and deleted")
	g.Expect(apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(leftover), &batchv1.Job{}))).To(BeTrue())

	for k, want := range specs {
		got, _ := specOf(g, c, namespaceOf(k), nameOf(k))
		g.Expect(got).To(Equal(want), "%s: spec changed by our controller", k)
	}
	out = p.mustShell(t, stepListCaches)
	g.Expect(out).To(MatchRegexp(`kube-fledged\s+web\s+True\s+Succeeded\s+ImageCacheRefresh\s+4/4\s`))
	g.Expect(p.mustShell(t, stepListJobs)).To(ContainSubstring("No resources found"))
	g.Expect(p.mustShell(t, stepWebhooks)).To(Equal("validatingwebhookconfiguration.admissionregistration.k8s.io/kube-fledged-kubefledged\n"),
		"our webhook configuration, and no other")
	lap("procedure to settled caches")

	ratcheting(t, g, c, p.ns, "gpu")
}

// ourSchemaServed waits until the API server applies our CRD's schema: a
// cache with no list passes the original's (it required the field only)
// and not ours. The check of the caches before it would otherwise race the
// switch.
func ourSchemaServed(g Gomega, c client.Client, ns string) {
	u := &unstructured.Unstructured{Object: map[string]interface{}{"spec": map[string]interface{}{"cacheSpec": []interface{}{}}}}
	u.SetGroupVersionKind(imageCacheGVK)
	u.SetNamespace(ns)
	u.SetGenerateName("probe-")
	g.Eventually(func() bool {
		return apierrors.IsInvalid(c.Create(context.Background(), u.DeepCopy(), client.DryRunAll))
	}).WithTimeout(timeout).WithPolling(poll).Should(BeTrue(), "our CRD's schema is not in effect")
}

// checkCaches runs the documented check of the stored caches against our
// CRD's bounds and expects it to pass those marked true and name the
// others. Where jq is missing it makes the same API calls itself: a dry-run
// create of each cache's spec under a generated name.
func checkCaches(t *testing.T, g Gomega, c client.Client, p procedure, valid map[string]bool) {
	t.Helper()
	p.documented(t, stepCheckCaches)
	if _, err := exec.LookPath("jq"); err == nil {
		out, err := p.shell(t, stepCheckCaches)
		allValid := true
		for k, ok := range valid {
			allValid = allValid && ok
			if ok {
				g.Expect(out).To(MatchRegexp(`imagecache.kubefledged.io/%s-[a-z0-9]{5}\n`, nameOf(k)), "%s passes", k)
			} else {
				g.Expect(out).To(MatchRegexp(`The ImageCache "%s-[a-z0-9]{5}" is invalid`, nameOf(k)), "%s is named", k)
			}
		}
		if allValid {
			g.Expect(err).NotTo(HaveOccurred())
		} else {
			g.Expect(err).To(HaveOccurred(), "the check exits non-zero when a cache is out of bounds")
		}
		return
	}
	t.Log("jq is not installed: the documented check runs as its API calls")
	for k, ok := range valid {
		spec, _ := specOf(g, c, namespaceOf(k), nameOf(k))
		u := &unstructured.Unstructured{Object: map[string]interface{}{"spec": spec}}
		u.SetGroupVersionKind(imageCacheGVK)
		u.SetNamespace(namespaceOf(k))
		u.SetGenerateName(nameOf(k) + "-")
		err := c.Create(context.Background(), u, client.DryRunAll)
		if ok {
			g.Expect(err).NotTo(HaveOccurred(), "%s passes", k)
		} else {
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s is named: %v", k, err)
		}
	}
}

// ratcheting checks what the document says of a stored cache outside our
// CRD's bounds: the refresh annotation is admitted, our controller acts on
// it and removes it (writes that leave the spec as it is), while an edit of
// the spec that keeps it out of bounds is refused.
func ratcheting(t *testing.T, g Gomega, c client.Client, ns, name string) {
	t.Helper()
	ctx := context.Background()
	before := settled(g, c, ns, name)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"after-upgrade"}}}`, v1alpha2.RefreshAnnotation)
	g.Expect(c.Patch(ctx, before.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed(),
		"an annotation on a cache over our bounds is refused: no ratcheting")
	g.Eventually(func(g Gomega) {
		ic := &v1alpha2.ImageCache{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ic)).To(Succeed())
		g.Expect(ic.Annotations).NotTo(HaveKey(v1alpha2.RefreshAnnotation), "our controller did not remove the annotation")
		g.Expect(ic.Status.StartTime.Time).To(BeTemporally(">", before.Status.StartTime.Time))
		g.Expect(ic.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusNoImagesPulledOrDeleted))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	ic := &v1alpha2.ImageCache{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ic)).To(Succeed())
	ic.Spec.CacheSpec[0].Images[0] = "registry.example.com/ml/model-renamed:v1"
	err := c.Update(ctx, ic)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "an edit keeping 257 images in a list was admitted: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("256"))
}

func namespaceOf(k string) string { ns, _, _ := strings.Cut(k, "/"); return ns }
func nameOf(k string) string      { _, n, _ := strings.Cut(k, "/"); return n }
