// Package golden renders the kube-fledged chart the way `helm template` does,
// for the golden tests in this directory and for the operator's tests, which
// compare what the chart gives on its own with what the operator asks of it.
package golden

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/releaseutil"
	"sigs.k8s.io/yaml"

	"github.com/kubefledged/kube-fledged/test/framework/repo"
)

// Release name and namespace of every rendering, so goldens stay stable.
const (
	ReleaseName = "kubefledged"
	Namespace   = "kube-fledged"
)

// ChartDir is the chart's directory, found from the working directory (a
// package's, or the repository root for hack/gen-rbac) rather than from this
// file's path, which a -trimpath build (make test's) no longer holds.
func ChartDir() string {
	root, err := repo.Root()
	if err != nil {
		root = "."
	}
	return filepath.Join(root, "helm-charts", "kubefledged")
}

// LoadChart loads the chart from ChartDir.
func LoadChart() (*chart.Chart, error) {
	return loader.Load(ChartDir())
}

// Rendered is one rendering: the manifests in install order, the hooks
// (the `helm test` objects) and the notes.
type Rendered struct {
	Manifests []releaseutil.Manifest
	Hooks     []releaseutil.Manifest
	Notes     string
}

// String is the golden form: the manifests (each names its template), the
// hooks, then the notes.
func (r Rendered) String() string {
	var b strings.Builder
	for _, m := range r.Manifests {
		fmt.Fprintf(&b, "---\n%s\n", strings.TrimSpace(m.Content))
	}
	for _, m := range r.Hooks {
		fmt.Fprintf(&b, "--- hook\n%s\n", strings.TrimSpace(m.Content))
	}
	fmt.Fprintf(&b, "--- NOTES.txt\n%s\n", strings.TrimSpace(r.Notes))
	return b.String()
}

// All is the manifests and the hooks.
func (r Rendered) All() []releaseutil.Manifest {
	return append(append([]releaseutil.Manifest{}, r.Manifests...), r.Hooks...)
}

// Render renders chrt with vals as `helm template` would (client only, so
// values are checked against values.schema.json but nothing is contacted).
func Render(chrt *chart.Chart, vals map[string]interface{}) (Rendered, error) {
	cfg := &action.Configuration{Log: func(string, ...interface{}) {}}
	install := action.NewInstall(cfg)
	install.DryRun = true
	install.ClientOnly = true
	install.Replace = true
	install.ReleaseName = ReleaseName
	install.Namespace = Namespace
	install.KubeVersion = &chartutil.KubeVersion{Version: "v1.35.0", Major: "1", Minor: "35"}
	install.APIVersions = chartutil.VersionSet{"monitoring.coreos.com/v1", "cert-manager.io/v1"}
	if vals == nil {
		vals = map[string]interface{}{}
	}
	rel, err := install.Run(chrt, vals)
	if err != nil {
		return Rendered{}, err
	}
	_, manifests, err := releaseutil.SortManifests(releaseutil.SplitManifests(rel.Manifest), nil, releaseutil.InstallOrder)
	if err != nil {
		return Rendered{}, err
	}
	// SortManifests orders by kind; within a kind keep a stable order.
	sort.SliceStable(manifests, func(i, j int) bool {
		ki, kj := kindRank(manifests[i]), kindRank(manifests[j])
		if ki != kj {
			return ki < kj
		}
		return manifests[i].Name+headName(manifests[i]) < manifests[j].Name+headName(manifests[j])
	})
	// Hooks come in the order Helm runs them (weight, then kind, then name).
	var hooks []releaseutil.Manifest
	for _, h := range rel.Hooks {
		var head releaseutil.SimpleHead
		if err := yaml.Unmarshal([]byte(h.Manifest), &head); err != nil {
			return Rendered{}, fmt.Errorf("hook %s: %w", h.Path, err)
		}
		hooks = append(hooks, releaseutil.Manifest{Name: h.Path, Content: h.Manifest, Head: &head})
	}
	return Rendered{Manifests: manifests, Hooks: hooks, Notes: rel.Info.Notes}, nil
}

// FindHook returns the hooks of one kind (and name, when not empty).
func (r Rendered) FindHook(kind, name string) []releaseutil.Manifest {
	return Rendered{Manifests: r.Hooks}.Find(kind, name)
}

// headName is a manifest's object name; a document without metadata (what
// the injection test's values may make of a template) sorts as unnamed
// rather than crash the rendering.
func headName(m releaseutil.Manifest) string {
	if m.Head == nil || m.Head.Metadata == nil {
		return ""
	}
	return m.Head.Metadata.Name
}

func kindRank(m releaseutil.Manifest) int {
	for i, k := range releaseutil.InstallOrder {
		if m.Head != nil && m.Head.Kind == k {
			return i
		}
	}
	return len(releaseutil.InstallOrder)
}

// ReadValues reads a YAML values file; an empty file gives empty values.
func ReadValues(path string) (map[string]interface{}, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	vals := map[string]interface{}{}
	if err := yaml.Unmarshal(b, &vals); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if vals == nil {
		vals = map[string]interface{}{}
	}
	return vals, nil
}

// Find returns the manifests of one kind (and name, when not empty).
func (r Rendered) Find(kind, name string) []releaseutil.Manifest {
	var out []releaseutil.Manifest
	for _, m := range r.Manifests {
		if m.Head == nil || m.Head.Kind != kind {
			continue
		}
		if name != "" && (m.Head.Metadata == nil || m.Head.Metadata.Name != name) {
			continue
		}
		out = append(out, m)
	}
	return out
}
