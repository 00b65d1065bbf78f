// Package olmbundle derives other versions of the checked-in OLM bundle
// (bundle/) for tests: the upgrade a catalog offers needs a second bundle
// whose CSV replaces the first, and a node that cannot pull ghcr.io needs
// the images renamed to where it can, as `make bundle IMG=...` would name
// them. Everything else is the checked-in bundle, byte for byte.
package olmbundle

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/kubefledged/kube-fledged/test/framework/files"
)

// Options says what differs from the source bundle.
type Options struct {
	// Version is the new CSV's spec.version; its name becomes
	// <package>.v<Version>. Empty keeps both.
	Version string
	// Replaces is the new CSV's spec.replaces (a CSV name); empty keeps it.
	Replaces string
	// Images maps image references to others, replaced wherever they occur
	// in the manifests (the operator's Deployment, RELATED_IMAGE_*,
	// relatedImages, the containerImage annotation).
	Images map[string]string
}

// Derive copies the bundle at src to dst (which must not exist) with o's
// changes, and returns the new CSV's name.
func Derive(src, dst string, o Options) (string, error) {
	if _, err := os.Stat(dst); err == nil {
		return "", fmt.Errorf("olmbundle: %s exists", dst)
	}
	var csvPath string
	err := files.CopyTree(src, dst, func(rel string, raw []byte) []byte {
		for from, with := range o.Images {
			raw = bytes.ReplaceAll(raw, []byte(from), []byte(with))
		}
		if strings.HasSuffix(rel, ".clusterserviceversion.yaml") {
			csvPath = filepath.Join(dst, rel)
		}
		return raw
	})
	if err != nil {
		return "", err
	}
	if csvPath == "" {
		return "", fmt.Errorf("olmbundle: no *.clusterserviceversion.yaml in %s", src)
	}
	return editCSV(csvPath, o)
}

// editCSV sets the version, name and replaces of the CSV at p. The file is
// rewritten from its parsed form, which keeps every value but not the
// order or layout of its keys.
func editCSV(p string, o Options) (string, error) {
	raw, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	var csv map[string]any
	if err := yaml.Unmarshal(raw, &csv); err != nil {
		return "", fmt.Errorf("olmbundle: %s: %w", p, err)
	}
	meta, _ := csv["metadata"].(map[string]any)
	spec, _ := csv["spec"].(map[string]any)
	name, _ := meta["name"].(string)
	old, _ := spec["version"].(string)
	if meta == nil || spec == nil || name == "" || old == "" || !strings.HasSuffix(name, ".v"+old) {
		return "", fmt.Errorf("olmbundle: %s: want a CSV named <package>.v<spec.version>", p)
	}
	if o.Version == "" && o.Replaces == "" {
		return name, nil
	}
	if o.Version != "" {
		name = strings.TrimSuffix(name, old) + o.Version
		meta["name"] = name
		spec["version"] = o.Version
	}
	if o.Replaces != "" {
		spec["replaces"] = o.Replaces
	}
	out, err := yaml.Marshal(csv)
	if err != nil {
		return "", err
	}
	return name, os.WriteFile(p, out, 0o644)
}
