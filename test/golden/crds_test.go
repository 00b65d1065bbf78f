package golden

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// kubectl expands a category before it looks a resource up by that name, so
// a category spelt like one of our resources hides it: with the ImageCache
// CRD in the category kubefledged, `kubectl get kubefledged` listed the
// ImageCaches beside the KubeFledged resources. Every copy of our CRDs we
// ship is checked, since each is what some install applies.
func TestCRDCategoriesShadowNoResource(t *testing.T) {
	const imageCaches, kubeFledgeds = "imagecaches.kubefledged.io", "kubefledgeds.charts.helm.kubefledged.io"
	root := filepath.Join(ChartDir(), "..", "..")
	cases := []struct {
		dir  string
		want []string
	}{
		{dir: "config/crd/bases", want: []string{imageCaches, kubeFledgeds}},
		{dir: "helm-charts/kubefledged/crds", want: []string{imageCaches}},
		{dir: "bundle/manifests", want: []string{imageCaches, kubeFledgeds}},
	}
	g := NewWithT(t)
	var all []*apiextensionsv1.CustomResourceDefinition
	for _, c := range cases {
		crds := readCRDs(g, filepath.Join(root, c.dir))
		var names []string
		for _, crd := range crds {
			names = append(names, crd.Name)
		}
		g.Expect(names).To(ConsistOf(c.want), c.dir)
		all = append(all, crds...)
	}

	// What each name given to kubectl get stands for.
	resources := map[string]string{}
	for _, crd := range all {
		n := crd.Spec.Names
		for _, name := range append([]string{strings.ToLower(n.Kind), n.Plural, n.Singular}, n.ShortNames...) {
			resources[name] = crd.Name
		}
	}
	for _, c := range cases {
		t.Run(c.dir, func(t *testing.T) {
			g := NewWithT(t)
			for _, crd := range readCRDs(g, filepath.Join(root, c.dir)) {
				for _, category := range crd.Spec.Names.Categories {
					g.Expect(resources).NotTo(HaveKey(category),
						"%s: the category %q of %s is also a name of %s", c.dir, category, crd.Name, resources[category])
				}
			}
		})
	}
}

// readCRDs reads the CustomResourceDefinitions among the YAML files of dir,
// one object a file, as controller-gen and operator-sdk write them.
func readCRDs(g Gomega, dir string) []*apiextensionsv1.CustomResourceDefinition {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		raw, err := os.ReadFile(f)
		g.Expect(err).NotTo(HaveOccurred())
		var head metav1.TypeMeta
		g.Expect(yaml.Unmarshal(raw, &head)).To(Succeed(), f)
		if head.Kind != "CustomResourceDefinition" {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(yaml.UnmarshalStrict(raw, crd)).To(Succeed(), f)
		out = append(out, crd)
	}
	return out
}

// `kubectl get ic` answers first whether the images are there (READY, the
// Ready condition), then what the latest operation did, with the columns
// we had before READY kept in their order; `-o wide` (priority 1) adds the
// pairs a cache that pins holds pinned and the Ready condition's message.
// Every shipped copy of the CRD must agree, since each is what some install
// applies. test/e2e/imagecache's
// TestKubectlColumns reads them through kubectl.
func TestImageCachePrinterColumns(t *testing.T) {
	type column struct {
		Name, Type, JSONPath string
		Priority             int32
	}
	want := []column{
		{"Ready", "string", `.status.conditions[?(@.type=="Ready")].status`, 0},
		{"Status", "string", ".status.status", 0},
		{"Reason", "string", ".status.reason", 0},
		{"Progress", "string", ".status.progress", 0},
		{"Age", "date", ".metadata.creationTimestamp", 0},
		{"Pinned", "integer", ".status.counts.pinned", 1},
		{"Message", "string", `.status.conditions[?(@.type=="Ready")].message`, 1},
	}
	root := filepath.Join(ChartDir(), "..", "..")
	for _, dir := range []string{"config/crd/bases", "helm-charts/kubefledged/crds", "bundle/manifests"} {
		t.Run(dir, func(t *testing.T) {
			g := NewWithT(t)
			found := false
			for _, crd := range readCRDs(g, filepath.Join(root, dir)) {
				if crd.Name != "imagecaches.kubefledged.io" {
					continue
				}
				found = true
				for _, v := range crd.Spec.Versions {
					var got []column
					for _, c := range v.AdditionalPrinterColumns {
						got = append(got, column{c.Name, c.Type, c.JSONPath, c.Priority})
					}
					g.Expect(got).To(Equal(want), "%s %s", dir, v.Name)
				}
			}
			g.Expect(found).To(BeTrue(), "no ImageCache CRD in %s", dir)
		})
	}
}
