package golden

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// mirrorOverlay is an overlay of config/default that points `images:` at a
// mirror, by digest; its Deployments are rendered into golden.yaml beside it.
const mirrorOverlay = "testdata/kustomize-mirror"

// TestKustomizeGolden renders the mirror overlay with kustomize's own
// library and holds the Deployments to golden.yaml (`make golden` writes
// it), and the whole rendering to the mirror: the upstream repository
// appears nowhere, so that the operator's RELATED_IMAGE_KUBEFLEDGED, which
// becomes the controller's and the Jobs' image, moves with the container's.
func TestKustomizeGolden(t *testing.T) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resMap, err := k.Run(filesys.MakeFsOnDisk(), mirrorOverlay)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", mirrorOverlay, err)
	}
	all, err := resMap.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	const upstream, mirror = "ghcr.io/kubefledged/kubefledged", "mirror.example.com/airgap/kubefledged@sha256:"
	if strings.Contains(string(all), upstream) {
		for i, line := range strings.Split(string(all), "\n") {
			if strings.Contains(line, upstream) {
				t.Errorf("line %d still names the upstream image: %s", i+1, strings.TrimSpace(line))
			}
		}
	}
	var got strings.Builder
	for _, r := range resMap.Resources() {
		if r.GetKind() != "Deployment" {
			continue
		}
		raw, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		got.WriteString("---\n")
		got.Write(raw)
		var d struct {
			Spec struct {
				Template struct {
					Spec struct {
						Containers []struct {
							Image string `json:"image"`
							Env   []struct {
								Name  string `json:"name"`
								Value string `json:"value"`
							} `json:"env"`
						} `json:"containers"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(raw, &d); err != nil {
			t.Fatal(err)
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			images := []string{c.Image}
			for _, e := range c.Env {
				if strings.HasPrefix(e.Name, "RELATED_IMAGE_") {
					images = append(images, e.Value)
				}
			}
			if len(images) < 2 {
				t.Errorf("%s: no RELATED_IMAGE_* variable", r.GetName())
			}
			for _, img := range images {
				if !strings.HasPrefix(img, mirror) {
					t.Errorf("%s: %s is not the mirror's %s...", r.GetName(), img, mirror)
				}
			}
		}
	}
	path := filepath.Join(mirrorOverlay, "golden.yaml")
	if *update {
		if err := os.WriteFile(path, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run `make golden`)", err)
	}
	if got.String() != string(want) {
		t.Errorf("rendering differs from %s (run `make golden` and review the diff):\n%s", path, lineDiff(string(want), got.String()))
	}
}
