package operator

import (
	"os"
	"path/filepath"
	"testing"
)

// repoWatches is the repository's watches.yaml, the one the image ships.
var repoWatches = filepath.Join("..", "..", "watches.yaml")

func TestLoadWatchesRepoFile(t *testing.T) {
	t.Setenv("RELATED_IMAGE_KUBEFLEDGED", "")
	ws, err := LoadWatches(repoWatches)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 1 {
		t.Fatalf("want one watch, got %d", len(ws))
	}
	w := ws[0]
	if w.GroupVersionKind != KubeFledgedGVK {
		t.Errorf("GVK %s", w.GroupVersionKind)
	}
	if w.Chart == nil || w.Chart.Name() != "kubefledged" {
		t.Fatalf("chart not loaded: %+v", w.Chart)
	}
	if !*w.WatchDependentResources {
		t.Error("dependent resources must be watched")
	}
	// Unset RELATED_IMAGE_KUBEFLEDGED: no override, so local runs keep the
	// chart's image instead of an empty one.
	if len(w.OverrideValues) != 0 {
		t.Errorf("overrides with the variable unset: %v", w.OverrideValues)
	}
	if _, err := newReconciler(w, Options{MaxConcurrentReconciles: 1}, nil, nil); err != nil {
		t.Errorf("reconciler: %v", err)
	}
}

func TestLoadWatchesRelatedImage(t *testing.T) {
	ref := "registry.example.com/kubefledged@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	t.Setenv("RELATED_IMAGE_KUBEFLEDGED", ref)
	ws, err := LoadWatches(repoWatches)
	if err != nil {
		t.Fatal(err)
	}
	// The helper image runs as root on every node: the operator's
	// deployment names it, whatever a KubeFledged says.
	for _, key := range []string{"image.reference", "controller.helperImage"} {
		if got := ws[0].OverrideValues[key]; got != ref {
			t.Errorf("%s override = %q, want %q", key, got, ref)
		}
	}
}

// Chart paths resolve against the watches file, whatever the working dir.
func TestLoadWatchesRelativeToFile(t *testing.T) {
	dir := t.TempDir()
	chart, err := filepath.Abs(filepath.Join("..", "..", "helm-charts", "kubefledged"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(chart, filepath.Join(dir, "kf")); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "w.yaml")
	body := "- {group: example.com, version: v1, kind: Thing, chart: kf, watchDependentResources: false}\n"
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	ws, err := LoadWatches(file)
	if err != nil {
		t.Fatal(err)
	}
	if ws[0].ChartPath != filepath.Join(dir, "kf") || *ws[0].WatchDependentResources {
		t.Errorf("watch: %+v", ws[0])
	}
}

func TestLoadWatchesErrors(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"missing chart": "- {group: example.com, version: v1, kind: Thing, chart: nowhere}\n",
		"no kind":       "- {group: example.com, version: v1, chart: nowhere}\n",
		"not a list":    "group: example.com\n",
	} {
		file := filepath.Join(dir, "w.yaml")
		if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadWatches(file); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := LoadWatches(filepath.Join(dir, "absent.yaml")); err == nil {
		t.Error("absent file accepted")
	}
}

func TestOperatorInstallsNoCRDs(t *testing.T) {
	ws, err := LoadWatches(repoWatches)
	if err != nil {
		t.Fatal(err)
	}
	c := ws[0].Chart
	if len(c.CRDObjects()) == 0 {
		t.Fatal("the chart carries no CRD: nothing to test")
	}
	stripped := withoutCRDs(c)
	if n := len(stripped.CRDObjects()); n != 0 {
		t.Errorf("%d CRDs left", n)
	}
	if len(stripped.Files) != len(c.Files)-len(c.CRDObjects()) || len(c.CRDObjects()) == 0 {
		t.Error("withoutCRDs changed more than crds/, or changed the original")
	}
	if as, err := Aliases(stripped); err != nil || len(as) == 0 {
		t.Errorf("aliases lost: %v", err)
	}
}
