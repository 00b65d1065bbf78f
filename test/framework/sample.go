package framework

import (
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/kubefledged/kube-fledged/internal/operator"
	"github.com/kubefledged/kube-fledged/test/framework/repo"
)

// SampleKubeFledged reads config/samples' KubeFledged, the resource the README tells users
// to apply, into namespace ns (none when ns is empty).
func SampleKubeFledged(ns string) (*unstructured.Unstructured, error) {
	path, err := repo.Path("config", "samples", "charts_v1alpha2_kubefledged.yaml")
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	kf := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &kf.Object); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if !strings.EqualFold(kf.GetKind(), operator.KubeFledgedGVK.Kind) {
		return nil, fmt.Errorf("%s is a %s", path, kf.GetKind())
	}
	if ns != "" {
		kf.SetNamespace(ns)
	}
	return kf, nil
}
