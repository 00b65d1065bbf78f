package upgrade_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/action"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/framework/helmop"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// The steps of docs/install.md that only a manifest install needs, word
// for word.
const (
	stepManifestArgs     = `kubectl get deployment "$FULLNAME-controller" -n "$NS" -o jsonpath='{.spec.template.spec.containers[0].args}'`
	stepManifestService  = `kubectl delete service "$FULLNAME-webhook-server" -n "$NS" --ignore-not-found`
	stepManifestAccounts = `kubectl delete serviceaccount "$FULLNAME-controller" "$FULLNAME-webhook-server" -n "$NS" --ignore-not-found`
	stepManifestBindings = `kubectl delete clusterrolebinding "$FULLNAME-controller" "$FULLNAME-webhook-server" --ignore-not-found`
	stepManifestRoles    = `kubectl delete clusterrole "$FULLNAME-controller" "$FULLNAME-webhook-server" --ignore-not-found`
	stepManifestInstall  = `helm install "$RELEASE" helm-charts/kubefledged -n "$NS" --set controller.imageCacheRefreshFrequency=20m`
)

// TestFromManifests moves an original installed from its plain manifests
// (testdata/manifests-v0.10): no Helm release to uninstall, so each of its
// objects is deleted by name, the CRD and the caches kept, then ours is
// installed with Helm, the one flag the user had changed carried over by
// hand. The caches: web, Succeeded under the original, its images on both
// nodes; models, left Processing with one image missing on one node.
func TestFromManifests(t *testing.T) {
	g := NewWithT(t)
	c, _ := framework.Clients(t)
	ctx := context.Background()
	p := procedure{ns: "kube-fledged", release: "kube-fledged", fullname: "kubefledged"}

	// --- The cluster as the original left it. ---
	lap := freshCluster(t, g, c, p.ns)
	warm := []string{"nginx:1.27.3", "redis:7.4.1"}
	for _, n := range []string{"sandbox-node-0", "sandbox-node-1"} {
		g.Expect(sandbox.Get().SetNodeImages(ctx, n, kubeletImages(warm...))).To(Succeed())
	}
	g.Expect(framework.CreateCRDs(ctx, sandbox.Get().Config(), filepath.Join(originalChart, "crds", "imagecaches.yaml"))).To(Succeed())
	then := time.Now().Add(-time.Hour).Truncate(time.Second)
	originalCache(t, g, c, p.ns, "web", []interface{}{list(nil, warm...)}, originalStatus{status: "Succeeded", reason: "ImageCacheCreate",
		message: v1alpha2.ImageCacheMessageImagesPulledSuccessfully, started: then, completed: then.Add(20 * time.Second)})
	originalCache(t, g, c, p.ns, "models", []interface{}{list(nil, "redis:7.4.1", "busybox:1.36.1")},
		originalStatus{status: "Processing", reason: "ImageCacheCreate", message: v1alpha2.ImageCacheMessagePullingImages, started: time.Now().Truncate(time.Second)})
	kubectl(t, "apply", "-f", fixture("manifests-v0.10"))
	t.Cleanup(func() {
		// Whatever a failed run left of the original must not refuse the
		// next case's writes.
		kubectl(t, "delete", "--ignore-not-found", "-f", fixture("manifests-v0.10"))
	})
	originalWebhookRefuses(g, c, p.ns)
	lap("the original's cluster ready")

	// --- 1. Keep the settings: the controller's args. ---
	g.Expect(p.mustShell(t, stepManifestArgs)).To(ContainSubstring("--image-cache-refresh-frequency=20m"))

	// --- 2. Delete the original's objects, keep its CRD. ---
	for _, step := range []string{stepDeleteWebhook, stepDeleteDeploys, stepManifestService, stepManifestAccounts, stepManifestBindings, stepManifestRoles} {
		p.mustShell(t, step)
	}
	originalGone(t, g, c, p)

	// --- 3. Our CRD over theirs. ---
	p.mustShell(t, stepImageCacheCRD)
	framework.WaitEstablished(g, c, imageCacheCRD, timeout)
	ourSchemaServed(g, c, p.ns)

	// --- 4. Ours, with Helm, the changed flag as its value. ---
	p.documented(t, stepManifestInstall)
	helmInstall(t, g, p.ns, p.release, filepath.Join(repo, "helm-charts", "kubefledged"),
		map[string]interface{}{"controller": map[string]interface{}{"imageCacheRefreshFrequency": "20m"}})
	t.Cleanup(func() {
		u := action.NewUninstall(helmop.HelmConfig(t, p.ns))
		u.Wait, u.Timeout = true, timeout
		if _, err := u.Run(p.release); err != nil {
			t.Errorf("uninstalling our release: %v", err)
		}
	})
	ours := &appsv1.Deployment{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: p.ns, Name: "kube-fledged-kubefledged-controller"}, ours)).To(Succeed())
	g.Expect(ours.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--image-cache-refresh-frequency=20m"))
	runOurs(t, g, c, ours)
	ourWebhookAdmits(g, c, p.ns)

	// --- 5. The caches, kept and taken over. ---
	w := settled(g, c, p.ns, "web")
	g.Expect(w.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	g.Expect(w.Status.Reason).To(Equal(v1alpha2.ImageCacheReasonImageCacheRefresh))
	g.Expect(w.Status.Counts.AlreadyPresent).To(BeEquivalentTo(4))
	m := settled(g, c, p.ns, "models")
	g.Expect(m.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	g.Expect(m.Status.Reason).To(Equal(v1alpha2.ImageCacheReasonImageCacheCreate))
	g.Expect(m.Status.Counts.Succeeded).To(BeEquivalentTo(2), "busybox onto both nodes")
	g.Expect(p.mustShell(t, stepWebhooks)).To(Equal("validatingwebhookconfiguration.admissionregistration.k8s.io/kube-fledged-kubefledged\n"),
		"our webhook configuration, and not the original's")
	lap("procedure to settled caches")
}

// kubectl runs bin/kubectl against the sandbox, for what the original's
// user did, not a documented step.
func kubectl(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(repo, "bin", "kubectl"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+sandbox.Get().KubeconfigPath())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
}
