package install_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/operator"
	"github.com/kubefledged/kube-fledged/test/framework"
)

// Install #2: README's kustomize way in. `make deploy` installs the CRDs and the operator
// (config/default); the sample KubeFledged makes the operator render the controller; an
// edit of the resource's jobRetentionPolicy changes the controller.
const (
	// The operator's (config/default's): it installs from a KubeFledged there only.
	kustomizeNamespace = "kube-fledged-system"
	// The release is named after the resource, and a release name holding the chart's
	// name is the chart's fullname: the controller is <fullname>-controller.
	kustomizeRelease = "kubefledged"
)

// TestKustomize runs `make deploy` as a user would, with the sandbox's kubeconfig and the
// image this tree built, then applies the sample KubeFledged, set to retain and with the
// node's containerd socket, and runs the common end, whose policy change is a merge patch
// of the resource. The sandbox's kwok node is cordoned meanwhile: on a user's cluster
// every node runs pods, and here only the real node does.
func TestKustomize(t *testing.T) {
	framework.NeedRealNode(t)
	ctx := context.Background()
	fake := "sandbox-node-0"
	cordon(t, fake, true)
	t.Cleanup(func() { cordon(t, fake, false) })

	begin := time.Now()
	scratch := t.TempDir()
	makeTarget(t, scratch, "deploy")
	t.Logf("make deploy returned in %s", time.Since(begin).Round(time.Millisecond))
	t.Cleanup(func() { makeTarget(t, scratch, "undeploy") })

	kf, err := framework.SampleKubeFledged(kustomizeNamespace)
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{}
	ns.Name = kustomizeNamespace
	_ = k8s.Create(ctx, ns)
	if err := unstructured.SetNestedField(kf.Object, "retain", "spec", "controller", "jobRetentionPolicy"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(kf.Object, node.CRISocket(), "spec", "controller", "criSocketPath"); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, kf); err != nil {
		t.Fatalf("applying the sample KubeFledged: %v", err)
	}
	t.Cleanup(func() {
		_ = k8s.DeleteAllOf(ctx, &v1alpha2.ImageCache{}, client.InNamespace(kustomizeNamespace))
	})

	checkInstall(t, installation{
		how:                  "kustomize",
		began:                begin,
		namespace:            kustomizeNamespace,
		deployment:           kustomizeRelease + "-controller",
		webhookConfiguration: kustomizeRelease,
		setRetention: func(t *testing.T, policy string) {
			patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"controller": map[string]any{"jobRetentionPolicy": policy}}})
			target := &unstructured.Unstructured{}
			target.SetGroupVersionKind(operator.KubeFledgedGVK)
			target.SetNamespace(kustomizeNamespace)
			target.SetName(kf.GetName())
			if err := k8s.Patch(ctx, target, client.RawPatch(types.MergePatchType, patch)); err != nil {
				t.Fatalf("editing the KubeFledged: %v", err)
			}
		},
	})
}

// makeTarget runs a target of the Makefile against the sandbox, with the image this tree
// built, keeping its scratch copy of config/ in dir rather than in the shared bin/.
func makeTarget(t *testing.T, dir, target string) {
	t.Helper()
	cmd := exec.Command("make", "-s", target, "IMG="+ourImage, "OLM_SCRATCH="+dir, "DEPLOY_TIMEOUT=300s")
	cmd.Dir = repoDir
	cmd.Env = append(os.Environ(), "KUBECONFIG="+sb.KubeconfigPath())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make %s: %v\n%s", target, err, out)
	}
}

// cordon marks a node (un)schedulable.
func cordon(t *testing.T, name string, on bool) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"unschedulable": on}})
	n := &corev1.Node{}
	n.Name = name
	if err := k8s.Patch(context.Background(), n, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("cordon %s: %v", name, err)
	}
}
