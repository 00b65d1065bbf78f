package security

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/test/framework"
)

// TestRegistryPolicy applies the ValidatingAdmissionPolicy that
// docs/security.md gives shared clusters, as the file is, and checks that it
// refuses an ImageCache naming an image outside the listed registries (a
// look-alike host and an unqualified name included), admits one inside
// them, and leaves a cache stored before it writable as long as its spec
// stays.
func TestRegistryPolicy(t *testing.T) {
	w := setup(t)
	g := NewWithT(t)
	ctx := context.Background()
	ns := framework.Namespace(t, w.admin, "policy-")

	// Stored before the policy, with an image it would refuse.
	old := framework.CacheOnNode(ns, "before", "node-0", "docker.io/library/busybox:1.36")
	g.Expect(w.admin.Create(ctx, old)).To(Succeed())

	objs := policyObjects(t, filepath.Join(w.root, "docs", "examples", "imagecache-registry-policy.yaml"))
	for _, o := range objs {
		g.Expect(w.admin.Create(ctx, o)).To(Succeed(), o.GetKind())
	}
	t.Cleanup(func() {
		for _, o := range objs {
			_ = w.admin.Delete(ctx, o)
		}
		// The next tests create caches of any registry: wait until the
		// API server has dropped the policy.
		NewWithT(t).Eventually(func() error {
			return dryRun(ctx, w.admin, ns, "docker.io/library/nginx:1.27")
		}).WithTimeout(framework.ClusterTimeout).Should(Succeed())
	})

	// The API server compiles a new policy in the background: wait for the
	// first refusal, which only the policy can give.
	g.Eventually(func() error {
		return dryRun(ctx, w.admin, ns, "docker.io/library/nginx:1.27")
	}).WithTimeout(framework.ClusterTimeout).Should(MatchError(ContainSubstring("may only name images of registry.example.com/")))

	for _, image := range []string{"nginx:1.27", "registry.example.com.attacker.io/x:1", "ghcr.io/other/app:v1"} {
		err := dryRun(ctx, w.admin, ns, image)
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s: %v", image, err)
	}
	for _, image := range []string{"registry.example.com/team/app:v1", "ghcr.io/kubefledged/kubefledged:v0.11.0"} {
		g.Expect(dryRun(ctx, w.admin, ns, image)).To(Succeed(), image)
	}

	// A write that leaves the spec (the controller consuming an annotation)
	// passes; an edit of the spec is checked.
	g.Expect(w.admin.Get(ctx, client.ObjectKeyFromObject(old), old)).To(Succeed())
	old.Annotations = map[string]string{"kubefledged.io/refresh-imagecache": ""}
	g.Expect(w.admin.Update(ctx, old)).To(Succeed())
	old.Spec.CacheSpec[0].Images = append(old.Spec.CacheSpec[0].Images, "docker.io/library/nginx:1.27")
	g.Expect(apierrors.IsForbidden(w.admin.Update(ctx, old))).To(BeTrue())
}

func dryRun(ctx context.Context, c client.Client, ns, image string) error {
	return c.Create(ctx, framework.CacheOnNode(ns, "probe", "node-0", image), client.DryRunAll)
}

func policyObjects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	if len(out) != 2 {
		t.Fatalf("%s: %d objects, want the policy and its binding", path, len(out))
	}
	return out
}
