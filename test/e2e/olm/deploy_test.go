package olm_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/kubefledged/kube-fledged/test/framework"
)

// TestKustomizeDeploy installs config/default as `make deploy` does (the
// same kustomization, rendered in-process; `make deploy` only changes the
// image) and runs the operator as its Deployment says. Without OLM there is
// no olm.targetNamespaces annotation, so the operator watches every
// namespace: this is the all-namespaces case, with the KubeFledged in the
// operator's own namespace, the only one it installs from. Then it removes
// everything as `make undeploy` does.
func TestKustomizeDeploy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	k8s, _ := framework.Clients(t)

	// The kustomize CLI's order: namespaces and CRDs first.
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionLegacy
	resmap, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), filepath.Join(repoRoot, "config", "default"))
	g.Expect(err).NotTo(HaveOccurred())
	var objs []*unstructured.Unstructured
	for _, r := range resmap.Resources() {
		y, err := r.AsYAML()
		g.Expect(err).NotTo(HaveOccurred())
		u := &unstructured.Unstructured{}
		g.Expect(yaml.Unmarshal(y, &u.Object)).To(Succeed())
		objs = append(objs, u)
	}
	// Leave the sandbox as it was even when a step fails, for the tests
	// after this one.
	t.Cleanup(func() { undeploy(t, k8s, objs) })

	var dep *appsv1.Deployment
	for _, u := range objs {
		g.Expect(k8s.Create(ctx, u.DeepCopy())).To(Succeed(), "%s %s", u.GetKind(), u.GetName())
		switch u.GetKind() {
		case "CustomResourceDefinition":
			framework.WaitEstablished(g, k8s, u.GetName(), timeout)
		case "Deployment":
			g.Expect(dep).To(BeNil(), "config/default has two Deployments")
			dep = &appsv1.Deployment{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(u), dep)).To(Succeed())
		}
	}
	g.Expect(dep).NotTo(BeNil(), "config/default has no Deployment")

	cr, err := framework.SampleKubeFledged(dep.Namespace)
	g.Expect(err).NotTo(HaveOccurred())

	runOperatorPod(t, dep, cr)

	t.Run("undeploy removes everything", func(t *testing.T) {
		g := NewWithT(t)
		undeploy(t, k8s, objs)
		// Namespaces and CRDs go once what is in them is gone; a leftover
		// finalizer would keep them forever.
		g.Eventually(func(g Gomega) {
			for _, o := range objs {
				u := &unstructured.Unstructured{}
				u.SetGroupVersionKind(o.GroupVersionKind())
				err := k8s.Get(ctx, client.ObjectKeyFromObject(o), u)
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s %s still there (%v)", o.GetKind(), o.GetName(), err)
			}
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	})
}

// undeploy deletes what deploy created, last first, as `kubectl delete`
// of the same manifests does.
func undeploy(t *testing.T, k8s client.Client, objs []*unstructured.Unstructured) {
	t.Helper()
	for i := len(objs) - 1; i >= 0; i-- {
		if err := k8s.Delete(context.Background(), objs[i].DeepCopy()); client.IgnoreNotFound(err) != nil {
			t.Errorf("deleting %s %s: %v", objs[i].GetKind(), objs[i].GetName(), err)
		}
	}
}

// TestMakeTargetsUseKubectlOnPath reads what `make install`, `uninstall`,
// `deploy` and `undeploy` would run (make -n, nothing runs): the kubectl a
// user has on the PATH, and only when there is none bin/kubectl, built
// first if missing. They once always called bin/kubectl, which only the
// long tool build makes.
func TestMakeTargetsUseKubectlOnPath(t *testing.T) {
	mk, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make on the PATH")
	}
	// A PATH with only what make needs to read the Makefile (its SHELL is
	// bash), and maybe a kubectl. Nothing runs, so no other tool is needed.
	path := func(withKubectl bool) string {
		dir := t.TempDir()
		bash, err := exec.LookPath("bash")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(bash, filepath.Join(dir, "bash")); err != nil {
			t.Fatal(err)
		}
		if withKubectl {
			if err := os.WriteFile(filepath.Join(dir, "kubectl"), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	dryRun := func(t *testing.T, pathDir, localbin, target string) string {
		cmd := exec.Command(mk, "-n", "--no-print-directory", target)
		cmd.Dir = repoRoot
		cmd.Env = []string{"PATH=" + pathDir, "HOME=" + os.Getenv("HOME")}
		if localbin != "" {
			cmd.Args = append(cmd.Args, "LOCALBIN="+localbin)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make -n %s: %v\n%s", target, err, out)
		}
		return string(out)
	}
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"install", "uninstall", "deploy", "undeploy"} {
		t.Run(target, func(t *testing.T) {
			g := NewWithT(t)
			dir := path(true)
			out := dryRun(t, dir, "", target)
			g.Expect(out).To(ContainSubstring(filepath.Join(dir, "kubectl")+" "), "make -n %s runs no kubectl of the PATH:\n%s", target, out)
			g.Expect(out).NotTo(ContainSubstring(filepath.Join(root, "bin", "kubectl")), "make -n %s:\n%s", target, out)

			// No kubectl on the PATH and none built: bin/kubectl is built,
			// then run.
			empty := t.TempDir()
			out = dryRun(t, path(false), empty, target)
			g.Expect(out).To(ContainSubstring("k8s.io/kubernetes/cmd/kubectl"), "make -n %s does not build kubectl:\n%s", target, out)
			g.Expect(out).To(ContainSubstring(filepath.Join(empty, "kubectl")+" "), "make -n %s:\n%s", target, out)
		})
	}
}
