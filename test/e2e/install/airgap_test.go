package install_test

// Disconnected clusters: every way in pointed at a mirror of our image, under a name of the
// mirror's own, with the upstream name never pulled. TestAirGapped does it for the chart
// (image.repository and image.digest) and for kustomize (an overlay's `images:` on
// config/default); TestOLM does it for the bundle, whose CSV `make bundle` pinned by digest
// and which the test rewrites to the mirror as a mirror policy would (olm_test.go).
//
// What is emulated: the mirror is the node's own registry, under another repository
// (airgap/kubefledged) than the upstream one (kubefledged/kubefledged); "no pull of the
// upstream name" is read from that registry's request log, which names every request by
// the image name containerd asked for (containerd names the upstream registry of a
// mirrored pull in its ns parameter, so an upstream pull would show even though it lands
// on the same registry). Not emulated: no OpenShift, no ImageDigestMirrorSet (which would
// leave the CSV as it is and redirect the node's pulls; the test rewrites the CSV's
// references instead), and the node could still reach the upstream names' mirror: the
// registry log, not a network cut, shows that it never tried.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/test/framework"
)

// mirrorRepository is where the mirror holds our image in the node's registry: another
// name than the upstream one, as `oc adm catalog mirror` or `skopeo copy` to a company
// registry would give it.
const mirrorRepository = "airgap/kubefledged"

// mirrorImage is our image in the mirror, by digest (the index this tree built, which is
// the one the CSV pins): set by TestMain's Setup.
var mirrorImage string

// pushMirror copies our index into the mirror, by digest only, as oc-mirror does.
func pushMirror(ctx context.Context) error {
	var err error
	mirrorImage, err = node.PushLockedIndex(ctx, mirrorRepository+"@"+built.index.String(),
		lockedIndex.raw, lockedIndex.built, lockedIndex.manifests)
	return err
}

// csvAnnotations are the checked-in CSV's annotations.
func csvAnnotations() (map[string]string, error) {
	raw, err := os.ReadFile(filepath.Join(repoDir, "bundle", "manifests", "kube-fledged.clusterserviceversion.yaml"))
	if err != nil {
		return nil, err
	}
	var csv struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(raw, &csv); err != nil {
		return nil, err
	}
	return csv.Metadata.Annotations, nil
}

// pinnedImage is the image the checked-in CSV names, which `make bundle` pinned to the
// digest of this tree's image: the index TestMain built must be that very image.
func pinnedImage() (string, error) {
	annotations, err := csvAnnotations()
	if err != nil {
		return "", err
	}
	pinned := annotations["containerImage"]
	ref, err := name.NewDigest(pinned)
	if err != nil {
		return "", fmt.Errorf("the CSV's containerImage %q is not a digest reference: %w", pinned, err)
	}
	if ref.DigestStr() != built.index.String() {
		return "", fmt.Errorf("the CSV pins %s, but this tree builds %s: run `make bundle` (the product's code or chart changed since), "+
			"or run the tests with the Go release of IMAGE_GO in hack/image.mk (this is %s)", ref.DigestStr(), built.index, runtime.Version())
	}
	return pinned, nil
}

// TestAirGapped installs by the chart and by kustomize pointed at the mirror, each with
// our image gone from the node beforehand, so that any reference to the upstream name
// would have to be pulled: the controller runs, Ready, from the mirror; a cache's Jobs
// run their helpers from the mirror and the cache Succeeds; and the node's registry saw
// pulls of the mirror and none of the upstream name.
func TestAirGapped(t *testing.T) {
	framework.NeedRealNode(t)
	// Last, the mirror's name goes from the node too: containerd would otherwise hold our
	// image under both names, and the kubelet would report the pods of a later install by
	// the upstream name with the mirror's imageID.
	t.Cleanup(func() { forgetOurImage(t) })
	fake := "sandbox-node-0"
	cordon(t, fake, true)
	t.Cleanup(func() { cordon(t, fake, false) })

	t.Run("helm", func(t *testing.T) {
		since := forgetOurImage(t)
		ref, err := name.NewDigest(mirrorImage, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		chrt, err := loader.Load(filepath.Join(repoDir, "helm-charts", "kubefledged"))
		if err != nil {
			t.Fatal(err)
		}
		const ns, release = "airgap-helm", "airgap"
		cfg := helmConfigIn(t, ns)
		begin := time.Now()
		install := action.NewInstall(cfg)
		install.ReleaseName, install.Namespace, install.CreateNamespace = release, ns, true
		install.Timeout = framework.ClusterTimeout
		values := helmValues("retain")
		// What the chart's README tells an air-gapped install to set.
		values["image"] = map[string]any{"repository": ref.Context().Name(), "digest": ref.DigestStr()}
		if _, err := install.Run(chrt, values); err != nil {
			t.Fatalf("helm install: %v", err)
		}
		t.Cleanup(func() {
			_ = k8s.DeleteAllOf(context.Background(), &v1alpha2.ImageCache{}, client.InNamespace(ns))
			if _, err := action.NewUninstall(cfg).Run(release); err != nil {
				t.Errorf("helm uninstall: %v", err)
			}
		})
		// The chart names the image repository:appVersion@digest; the digest decides.
		want := fmt.Sprintf("%s:%s@%s", ref.Context().Name(), chrt.Metadata.AppVersion, ref.DigestStr())
		checkMirrored(t, installation{how: "airgap-helm", began: begin, namespace: ns,
			deployment: release + "-kubefledged-controller", image: want}, since)
	})

	t.Run("kustomize", func(t *testing.T) {
		since := forgetOurImage(t)
		// config/default's, the operator's: it installs from a KubeFledged there only.
		const ns = "kube-fledged-system"
		overlay := kustomizeOverlay(t)
		begin := time.Now()
		kustomizeApply(t, overlay, "apply", "--server-side")
		t.Cleanup(func() { kustomizeApply(t, overlay, "delete", "--ignore-not-found", "--wait") })
		// As `make deploy` would have: the CRDs served before a resource of theirs.
		framework.WaitEstablished(NewWithT(t), k8s, "kubefledgeds.charts.helm.kubefledged.io", readyTimeout)
		kf, err := framework.SampleKubeFledged(ns)
		if err != nil {
			t.Fatal(err)
		}
		for field, v := range map[string]string{"jobRetentionPolicy": "retain", "criSocketPath": node.CRISocket()} {
			if err := unstructured.SetNestedField(kf.Object, v, "spec", "controller", field); err != nil {
				t.Fatal(err)
			}
		}
		if err := k8s.Create(context.Background(), kf); err != nil {
			t.Fatalf("applying the sample KubeFledged: %v", err)
		}
		t.Cleanup(func() {
			// The operator removes its finalizer once the release is gone: the
			// KubeFledged goes while the operator still runs, as `make undeploy` does.
			_ = k8s.DeleteAllOf(context.Background(), &v1alpha2.ImageCache{}, client.InNamespace(ns))
			kubectl(t, "delete", "kubefledgeds.charts.helm.kubefledged.io", "--all", "-n", ns, "--wait", "--timeout=300s")
		})
		// The operator (the overlay's image) sets the controller's image from
		// RELATED_IMAGE_KUBEFLEDGED, which the overlay's `images:` rewrote too.
		checkMirrored(t, installation{how: "airgap-kustomize", began: begin, namespace: ns,
			deployment: kustomizeRelease + "-controller", image: mirrorImage}, since)
		operatorPods := &corev1.PodList{}
		if err := k8s.List(context.Background(), operatorPods, client.InNamespace("kube-fledged-system"),
			client.MatchingLabels{"control-plane": "kube-fledged-operator"}); err != nil {
			t.Fatal(err)
		}
		for _, p := range operatorPods.Items {
			NewWithT(t).Expect(p.Spec.Containers[0].Image).To(Equal(mirrorImage), "operator pod %s", p.Name)
		}
	})
}

// checkMirrored is the air-gapped end: the controller Ready from the install's image, a
// cache of two images Succeeded with the Jobs' helpers from that image, and the
// registry's log since the test began holding pulls of that image and none of the
// upstream name.
func checkMirrored(t *testing.T, in installation, since time.Time) {
	g := NewWithT(t)
	pod := rolledOut(g, in, "retain", readyTimeout)
	t.Logf("%s: install to a Ready controller in %s", in.how, time.Since(in.began).Round(time.Millisecond))
	checkOurImage(g, pod, in.image)
	t0 := time.Now()
	cacheSucceeds(g, in.namespace, "mirrored", retainedImages(in.how))
	t.Logf("%s: cache of %d images Succeeded in %s", in.how, len(retainedImages(in.how)), time.Since(t0).Round(time.Millisecond))
	checkHelperImage(g, jobsOf(g, in.namespace, "mirrored"), in.image)
	noUpstreamPulls(t, g, since, in.image)
}

// noUpstreamPulls holds the node's registry log since the given time to pulls of mirror
// and none of our image's upstream name, and containerd to holding no image under that
// name. The cached images, named as in their upstream registries, must show in the log
// by those names: the log sees an upstream name when one is pulled.
func noUpstreamPulls(t *testing.T, g Gomega, since time.Time, mirror string) {
	t.Helper()
	upstream, err := name.ParseReference(ourImage)
	g.Expect(err).NotTo(HaveOccurred())
	mirrored, err := name.ParseReference(mirror, name.Insecure)
	g.Expect(err).NotTo(HaveOccurred())
	names := map[string]int{}
	for _, rr := range node.RegistryRequests(since) {
		names[rr.Name]++
		g.Expect(rr.Name).NotTo(Equal(upstream.Context().Name()), "%s %s at %s: a pull of the upstream name", rr.Method, rr.Path, rr.Time.Format(time.RFC3339Nano))
	}
	g.Expect(names).To(HaveKey(mirrored.Context().Name()), "no pull of the mirror")
	g.Expect(names).To(HaveKey(ContainSubstring("ghcr.io/kubefledged/e2e-install-")), "the log does not name mirrored pulls by their upstream name: the check above proves nothing")
	img, err := node.ImageStatus(context.Background(), ourImage)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(img).To(BeNil(), "containerd holds %s", ourImage)
	t.Logf("the node's registry since %s: %v; none for %s", since.Format(time.TimeOnly), names, upstream.Context().Name())
}

// forgetOurImage removes our image from the node, under whatever name an earlier test
// pulled it, so that a reference to the upstream name now has to be pulled; it returns
// when the air-gapped part begins, for the registry's log.
func forgetOurImage(t *testing.T) time.Time {
	t.Helper()
	ctx := context.Background()
	for _, ref := range []string{ourImage, mirrorImage} {
		if err := node.RemoveImage(ctx, ref); err != nil {
			t.Fatal(err)
		}
	}
	return time.Now()
}

// kustomizeOverlay writes the overlay a user of a mirror writes over config/default: one
// `images:` entry naming the mirror by digest.
func kustomizeOverlay(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	abs, err := filepath.Abs(filepath.Join(repoDir, "config", "default"))
	if err != nil {
		t.Fatal(err)
	}
	base, err := filepath.Rel(dir, abs) // kustomize takes no absolute paths
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewDigest(mirrorImage, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	upstream, err := name.NewTag(ourImage)
	if err != nil {
		t.Fatal(err)
	}
	k := map[string]any{
		"resources": []string{base},
		"images": []map[string]string{{
			"name": upstream.Context().Name(), "newName": ref.Context().Name(), "digest": ref.DigestStr(),
		}},
	}
	raw, err := yaml.Marshal(k)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// kubectl runs bin/kubectl against the sandbox.
func kubectl(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir(t), "kubectl"), append([]string{"--kubeconfig", sb.KubeconfigPath()}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// kustomizeApply runs `kustomize build overlay | kubectl <args> -f -` with the tools of
// bin/, as the docs' air-gapped kustomize install does.
func kustomizeApply(t *testing.T, overlay string, args ...string) {
	t.Helper()
	bin := binDir(t)
	kubectl := strings.Join(append([]string{filepath.Join(bin, "kubectl"), "--kubeconfig", sb.KubeconfigPath()}, args...), " ")
	cmd := exec.Command("bash", "-o", "pipefail", "-c", filepath.Join(bin, "kustomize")+" build "+overlay+" | "+kubectl+" -f -")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kustomize build | kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
