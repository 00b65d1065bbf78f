package olmbundle_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/kubefledged/kube-fledged/internal/platform"
	"github.com/kubefledged/kube-fledged/test/framework/repo"
)

// The checked-in bundle is what OperatorHub and Red Hat's catalogs read, and
// `make bundle` writes it from config/manifests and hack/olm.mk: these tests
// hold the generated files, not the sources, so that a source the generator
// drops fails them too.

func read(t *testing.T, elem ...string) []byte {
	t.Helper()
	p, err := repo.Path(elem...)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

type csvMeta struct {
	Metadata struct {
		Annotations map[string]string `json:"annotations"`
		Labels      map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		MinKubeVersion string `json:"minKubeVersion"`
		Maturity       string `json:"maturity"`
	} `json:"spec"`
}

func readCSV(t *testing.T) csvMeta {
	t.Helper()
	dir, err := repo.Path("bundle", "manifests")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.clusterserviceversion.yaml"))
	if err != nil || len(files) != 1 {
		t.Fatalf("want one CSV in %s, got %v (%v)", dir, files, err)
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var c csvMeta
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// The standard set of OpenShift's feature annotations: the console filters
// by them and Red Hat's certification wants every one present, "true" or
// "false". The wanted values are the claims we can stand by today
// (config/manifests/openshift.yaml gives the reason for each); turning one
// to "true" must come with the feature, and a change here.
func TestCSVFeatureAnnotations(t *testing.T) {
	c := readCSV(t)
	for _, tt := range []struct {
		feature string
		want    string
	}{
		// Every image by digest (TestCSVImagesByDigest), as mirroring needs.
		{"disconnected", "true"},
		{"fips-compliant", "false"},
		{"proxy-aware", "false"},
		{"tls-profiles", "false"},
		{"token-auth-aws", "false"},
		{"token-auth-azure", "false"},
		{"token-auth-gcp", "false"},
		{"cnf", "false"},
		{"cni", "false"},
		{"csi", "false"},
	} {
		t.Run(tt.feature, func(t *testing.T) {
			key := "features.operators.openshift.io/" + tt.feature
			NewWithT(t).Expect(c.Metadata.Annotations).To(HaveKeyWithValue(key, tt.want))
		})
	}
	t.Run("no other feature", func(t *testing.T) {
		n := 0
		for k := range c.Metadata.Annotations {
			if strings.HasPrefix(k, "features.operators.openshift.io/") {
				n++
			}
		}
		NewWithT(t).Expect(n).To(Equal(10), "a feature annotation outside the standard set is a typo")
	})
}

// disconnected: "true" claims that every image the operator runs is named
// by digest, since OpenShift's mirror policies (ImageDigestMirrorSet) and
// `oc adm catalog mirror` remap digest references only: the Deployment's
// containers, the RELATED_IMAGE_* variables (the controller's and the Jobs'
// image, through watches.yaml), relatedImages and containerImage. All name
// the one image.
func TestCSVImagesByDigest(t *testing.T) {
	g := NewWithT(t)
	dir, err := repo.Path("bundle", "manifests")
	g.Expect(err).NotTo(HaveOccurred())
	files, err := filepath.Glob(filepath.Join(dir, "*.clusterserviceversion.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).To(HaveLen(1))
	raw, err := os.ReadFile(files[0])
	g.Expect(err).NotTo(HaveOccurred())
	var csv map[string]any
	g.Expect(yaml.Unmarshal(raw, &csv)).To(Succeed())
	found := map[string]string{} // where: reference
	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if n, ok := v["name"].(string); ok && strings.HasPrefix(n, "RELATED_IMAGE_") {
				found[where+"."+n] = v["value"].(string)
			}
			for k, e := range v {
				if s, ok := e.(string); ok && (k == "image" || k == "containerImage") {
					found[where+"."+k] = s
				}
				walk(where+"."+k, e)
			}
		case []any:
			for i, e := range v {
				walk(where+"["+strconv.Itoa(i)+"]", e)
			}
		}
	}
	walk("", csv)
	// The Deployment's container, RELATED_IMAGE_KUBEFLEDGED, relatedImages
	// and containerImage.
	g.Expect(len(found)).To(BeNumerically(">=", 4), "images found: %v", found)
	byDigest := MatchRegexp(`^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)+@sha256:[0-9a-f]{64}$`)
	var first string
	for where, ref := range found {
		g.Expect(ref).To(byDigest, "%s is not a digest reference", where)
		if first == "" {
			first = ref
		}
		g.Expect(ref).To(Equal(first), "%s names another image", where)
	}
}

// OLM offers an operator only on clusters whose nodes match its CSV's
// os/arch labels, and one without any counts as linux/amd64 alone: arm64
// clusters would not see it although the image runs there. The labels are
// exactly the platforms of internal/platform, which hack/image builds and
// the controller serves (arm/v7 is OLM's arch.arm: a node reports no
// variant).
func TestCSVPlatformLabels(t *testing.T) {
	c := readCSV(t)
	want := map[string]string{}
	for _, p := range platform.Image() {
		want["operatorframework.io/os."+p.OS] = "supported"
		want["operatorframework.io/arch."+p.Arch] = "supported"
	}
	got := map[string]string{}
	for k, v := range c.Metadata.Labels {
		if strings.HasPrefix(k, "operatorframework.io/os.") || strings.HasPrefix(k, "operatorframework.io/arch.") {
			got[k] = v
		}
	}
	g := NewWithT(t)
	g.Expect(want).To(HaveLen(6), "internal/platform: five architectures, all Linux")
	g.Expect(got).To(Equal(want), "the CSV's platform labels must be exactly the image's platforms (config/manifests/openshift.yaml, then make bundle)")
}

// Red Hat's catalogs read com.redhat.openshift.versions from the bundle
// image's labels, which hack/image takes from annotations.yaml and
// bundle.Dockerfile declares: both must say it, alike, and not offer the
// bundle on an OpenShift older than the CSV's minKubeVersion.
func TestOpenShiftVersions(t *testing.T) {
	g := NewWithT(t)
	var meta struct {
		Annotations map[string]string `json:"annotations"`
	}
	g.Expect(yaml.UnmarshalStrict(read(t, "bundle", "metadata", "annotations.yaml"), &meta)).To(Succeed())
	versions := meta.Annotations["com.redhat.openshift.versions"]
	g.Expect(versions).To(MatchRegexp(`^v4\.\d+$`), "annotations.yaml: one minimum release, v4.N (that one and later)")

	var labels []string
	for _, l := range strings.Split(string(read(t, "bundle.Dockerfile")), "\n") {
		if strings.HasPrefix(l, "LABEL com.redhat.openshift.versions=") {
			labels = append(labels, l)
		}
	}
	g.Expect(labels).To(ConsistOf("LABEL com.redhat.openshift.versions=" + versions))

	// OpenShift 4.N runs Kubernetes 1.(N+13) from 4.6 on (4.14: 1.27).
	minor, err := strconv.Atoi(strings.TrimPrefix(versions, "v4."))
	g.Expect(err).NotTo(HaveOccurred())
	kube := readCSV(t).Spec.MinKubeVersion
	g.Expect(kube).To(MatchRegexp(`^1\.\d+\.\d+$`))
	kubeMinor, err := strconv.Atoi(strings.Split(kube, ".")[1])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(minor+13).To(Equal(kubeMinor), "OpenShift v4.%d runs Kubernetes 1.%d, the CSV's minKubeVersion is %s", minor, minor+13, kube)
}
