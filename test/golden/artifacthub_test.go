package golden

import (
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/platform"
)

// artifactHubKeys are the annotations Artifact Hub reads from Chart.yaml;
// another artifacthub.io key is a typo it would silently ignore.
var artifactHubKeys = []string{
	"artifacthub.io/changes", "artifacthub.io/containsSecurityUpdates", "artifacthub.io/crds",
	"artifacthub.io/crdsExamples", "artifacthub.io/images", "artifacthub.io/license", "artifacthub.io/links",
	"artifacthub.io/prerelease",
}

// The Artifact Hub annotations parse in the shapes Artifact Hub reads, and
// say what is true of the chart: its image, its CRDs, its license.
func TestArtifactHubAnnotations(t *testing.T) {
	c := loadChart(t)
	ann := c.Metadata.Annotations
	for k := range ann {
		if strings.HasPrefix(k, "artifacthub.io/") && !slices.Contains(artifactHubKeys, k) {
			t.Errorf("unknown Artifact Hub annotation %s", k)
		}
	}
	for _, k := range artifactHubKeys {
		if ann[k] == "" {
			t.Errorf("no %s", k)
		}
	}
	strict := func(key string, into any) {
		t.Helper()
		if err := yaml.UnmarshalStrict([]byte(ann[key]), into); err != nil {
			t.Errorf("%s: %v", key, err)
		}
	}

	// The license is the repository's.
	license, err := os.ReadFile(filepath.Join(ChartDir(), "..", "..", "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	if ann["artifacthub.io/license"] != "Apache-2.0" || !strings.Contains(string(license), "Apache License\n                           Version 2.0") {
		t.Errorf("license %q, LICENSE is not the Apache License 2.0", ann["artifacthub.io/license"])
	}
	for _, k := range []string{"artifacthub.io/prerelease", "artifacthub.io/containsSecurityUpdates"} {
		if ann[k] != "true" && ann[k] != "false" {
			t.Errorf("%s: %q is not a boolean", k, ann[k])
		}
	}

	// The image is the one the chart installs by default.
	var images []struct {
		Name        string   `json:"name"`
		Image       string   `json:"image"`
		Platforms   []string `json:"platforms"`
		Whitelisted bool     `json:"whitelisted"`
	}
	strict("artifacthub.io/images", &images)
	img, _ := c.Values["image"].(map[string]any)
	want := img["repository"].(string) + ":" + c.Metadata.AppVersion
	// Its platforms are those make image builds (internal/platform).
	if plats := strings.Split(platform.List(), ","); len(images) != 1 || images[0].Image != want || !slices.Equal(images[0].Platforms, plats) {
		t.Errorf("images %+v, want the one %s for %v", images, want, plats)
	}

	// The CRDs listed are the chart's crds/.
	var crds []struct {
		Kind, Version, Name, DisplayName, Description string
	}
	strict("artifacthub.io/crds", &crds)
	files, err := filepath.Glob(filepath.Join(ChartDir(), "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("crds/: %v", err)
	}
	if len(crds) != len(files) {
		t.Errorf("%d CRDs listed, %d in crds/", len(crds), len(files))
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(raw, crd); err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(crds, func(e struct{ Kind, Version, Name, DisplayName, Description string }) bool {
			return e.Name == crd.Name
		})
		if i < 0 {
			t.Errorf("%s is not listed", crd.Name)
			continue
		}
		e := crds[i]
		served := slices.ContainsFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == e.Version && v.Served })
		if e.Kind != crd.Spec.Names.Kind || !served || e.DisplayName == "" || e.Description == "" {
			t.Errorf("listed as %+v; the CRD is kind %s, versions %v", e, crd.Spec.Names.Kind, crd.Spec.Versions)
		}
	}

	// The example is a valid ImageCache.
	var examples []v1alpha2.ImageCache
	strict("artifacthub.io/crdsExamples", &examples)
	for _, ex := range examples {
		if ex.APIVersion != v1alpha2.GroupVersion.String() || ex.Kind != "ImageCache" || len(ex.Spec.CacheSpec) == 0 || len(ex.Spec.CacheSpec[0].Images) == 0 {
			t.Errorf("example %+v", ex)
		}
	}

	var links []struct{ Name, URL string }
	strict("artifacthub.io/links", &links)
	for _, l := range links {
		u, err := url.Parse(l.URL)
		if l.Name == "" || err != nil || u.Scheme != "https" || u.Host == "" {
			t.Errorf("link %+v", l)
		}
	}

	var changes []struct {
		Kind, Description string
		Links             []struct{ Name, URL string }
	}
	strict("artifacthub.io/changes", &changes)
	if len(changes) == 0 {
		t.Error("no changes")
	}
	for _, ch := range changes {
		if !slices.Contains([]string{"added", "changed", "deprecated", "removed", "fixed", "security"}, ch.Kind) || ch.Description == "" {
			t.Errorf("change %+v", ch)
		}
	}
}
