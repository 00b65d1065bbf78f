package main

import (
	"os"
	"path/filepath"
	"testing"
)

// The committed CRD must be what the chart's schema gives today; a schema
// change without `make manifests` would let the API server and Helm disagree.
func TestCommittedCRDIsCurrent(t *testing.T) {
	root := filepath.Join("..", "..")
	got, err := Generate(filepath.Join(root, "helm-charts", "kubefledged", "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile(filepath.Join(root, "config", "crd", "bases", "charts.helm.kubefledged.io_kubefledgeds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if string(have) != string(got) {
		t.Error("config/crd/bases/charts.helm.kubefledged.io_kubefledgeds.yaml is stale: run `make manifests`")
	}
}
