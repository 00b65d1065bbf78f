package olmbundle_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/images"
	"github.com/kubefledged/kube-fledged/internal/webhook/validation"
)

// almExamples are the CSV's alm-examples, in order.
func almExamples(t *testing.T, c csvMeta) []map[string]any {
	t.Helper()
	var ex []map[string]any
	if err := json.Unmarshal([]byte(c.Metadata.Annotations["alm-examples"]), &ex); err != nil {
		t.Fatalf("alm-examples: %v", err)
	}
	return ex
}

// The console offers operatorframework.io/initialization-resource as the
// resource to create once the operator is installed, and nothing works
// until one KubeFledged exists. It must be the object both OLM tests
// install and watch deployed: test/e2e/olm's TestOLMInstall reads this
// annotation, test/e2e/install's TestOLM (real OLM) the first alm-example.
func TestInitializationResource(t *testing.T) {
	g := NewWithT(t)
	c := readCSV(t)
	raw := c.Metadata.Annotations["operatorframework.io/initialization-resource"]
	g.Expect(raw).NotTo(BeEmpty(), "no operatorframework.io/initialization-resource")
	var init map[string]any
	g.Expect(json.Unmarshal([]byte(raw), &init)).To(Succeed())
	g.Expect(init).To(HaveKeyWithValue("kind", "KubeFledged"))
	g.Expect(init).To(HaveKeyWithValue("apiVersion", "charts.helm.kubefledged.io/v1alpha2"))

	ex := almExamples(t, c)
	g.Expect(ex).NotTo(BeEmpty())
	g.Expect(init).To(Equal(ex[0]), "the initialization resource must be the first alm-example, the KubeFledged the OLM tests install")
}

// wellKnownNodeLabels are set by every kubelet, so a list that selects on
// them (with a value every Linux node has) still matches a plain cluster.
var wellKnownNodeLabels = map[string]string{"kubernetes.io/os": "linux"}

// publicRegistries serve their images without credentials. A placeholder
// (registry.example.com) or a private registry in the example fails every
// pull on a cluster that tries it as it is.
var publicRegistries = []string{"docker.io", "ghcr.io", "quay.io", "registry.k8s.io", "gcr.io", "us.gcr.io", "mcr.microsoft.com", "public.ecr.aws"}

// OperatorHub fills the ImageCache form from the first ImageCache of
// alm-examples: it must work as it is on a plain cluster (no pull Secret to
// create first, no node labels or taints a cluster does not have) and be
// admitted by the webhook's rules. kustomize's default order once put the
// private-registry, GPU-only sample first.
func TestFirstImageCacheExampleWorksAnywhere(t *testing.T) {
	g := NewWithT(t)
	var first map[string]any
	for _, ex := range almExamples(t, readCSV(t)) {
		if ex["kind"] == "ImageCache" {
			first = ex
			break
		}
	}
	g.Expect(first).NotTo(BeNil(), "no ImageCache in alm-examples")

	raw, err := json.Marshal(first)
	g.Expect(err).NotTo(HaveOccurred())
	ic := &v1alpha2.ImageCache{}
	g.Expect(yaml.UnmarshalStrict(raw, ic)).To(Succeed(), "the example must be an ImageCache of this API, every field known")
	name := ic.Name

	g.Expect(validation.ValidateCreate(ic)).To(BeEmpty(), "the webhook refuses %s", name)
	g.Expect(ic.Spec.ImagePullSecrets).To(BeEmpty(), "%s needs a pull Secret", name)
	g.Expect(ic.Spec.CacheSpec).NotTo(BeEmpty())
	for i, list := range ic.Spec.CacheSpec {
		for k, v := range list.NodeSelector {
			g.Expect(wellKnownNodeLabels).To(HaveKeyWithValue(k, v), "%s list %d selects nodes by %s=%s, which a plain cluster's nodes lack", name, i, k, v)
		}
		g.Expect(list.Tolerations).To(BeEmpty(), "%s list %d is for tainted nodes", name, i)
		g.Expect(list.FromPods).To(BeNil(), "%s list %d depends on the pods running", name, i)
		g.Expect(list.FromWorkloads).To(BeNil(), "%s list %d depends on the workloads there are", name, i)
		g.Expect(list.Images).NotTo(BeEmpty(), "%s list %d", name, i)
		for _, s := range list.Images {
			ref, err := images.Parse(s)
			g.Expect(err).NotTo(HaveOccurred())
			registry, _, _ := strings.Cut(ref.Name, "/")
			g.Expect(publicRegistries).To(ContainElement(registry), "%s: %s is not on a public registry", name, s)
			g.Expect(ref.Tag).NotTo(Equal("latest"), "%s: %s floats; an example pins a tag", name, s)
		}
	}
}

// mkVariable reads `NAME ?= value` from hack/olm.mk.
func mkVariable(t *testing.T, name string) string {
	t.Helper()
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(name) + `\s*\?=\s*(\S+)\s*$`)
	s := bufio.NewScanner(bytes.NewReader(read(t, "hack", "olm.mk")))
	for s.Scan() {
		if m := re.FindStringSubmatch(s.Text()); m != nil {
			return m[1]
		}
	}
	t.Fatalf("no %s ?= in hack/olm.mk", name)
	return ""
}

// The capability level is a claim OperatorHub shows beside the operator:
// Seamless Upgrades is what test/e2e/install's TestOLM proves (OLM replaces
// v0.11.0 by the next bundle in place, the operator upgrades the controller
// and the ImageCaches are kept and served), so it is claimed, and nothing
// above it (Full Lifecycle wants backup and restore, which does not exist).
// A bundle's maturity names the channel it is published in: a stable
// bundle in the stable channel, and users on it subscribe by that name.
func TestCapabilityAndChannels(t *testing.T) {
	g := NewWithT(t)
	c := readCSV(t)
	g.Expect(c.Metadata.Annotations["capabilities"]).To(Equal("Seamless Upgrades"))

	var meta struct {
		Annotations map[string]string `json:"annotations"`
	}
	g.Expect(yaml.UnmarshalStrict(read(t, "bundle", "metadata", "annotations.yaml"), &meta)).To(Succeed())
	channels := strings.Split(meta.Annotations["operators.operatorframework.io.bundle.channels.v1"], ",")
	def := meta.Annotations["operators.operatorframework.io.bundle.channel.default.v1"]
	g.Expect(channels).To(Equal(strings.Split(mkVariable(t, "CHANNELS"), ",")), "annotations.yaml against hack/olm.mk's CHANNELS (run make bundle)")
	g.Expect(def).To(Equal(mkVariable(t, "DEFAULT_CHANNEL")), "annotations.yaml against hack/olm.mk's DEFAULT_CHANNEL (run make bundle)")
	g.Expect(channels).To(ContainElement(def))
	g.Expect(c.Spec.Maturity).To(Equal(def), "the CSV's maturity and its default channel")
	g.Expect(channels).To(ConsistOf(c.Spec.Maturity), "a bundle of maturity %s published in channels %v", c.Spec.Maturity, channels)

	dockerfile := string(read(t, "bundle.Dockerfile"))
	g.Expect(dockerfile).To(ContainSubstring("\nLABEL operators.operatorframework.io.bundle.channels.v1=" + strings.Join(channels, ",") + "\n"))
	g.Expect(dockerfile).To(ContainSubstring("\nLABEL operators.operatorframework.io.bundle.channel.default.v1=" + def + "\n"))
}
