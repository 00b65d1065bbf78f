package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var chartDir = filepath.Join("..", "..", "helm-charts", "kubefledged")

// The committed README must be what the chart gives today; `make verify`
// checks the same.
func TestCommittedREADMEIsCurrent(t *testing.T) {
	got, err := Generate(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if string(have) != string(got) {
		t.Error("helm-charts/kubefledged/README.md is stale: run `make chart-readme`")
	}
}

// Every value of the chart says what it is for.
func TestEveryValueDocumented(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := ValueRows(raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) < 50 {
		t.Fatalf("%d rows", len(rows))
	}
	for _, r := range rows {
		if r.Description == "" {
			t.Errorf("%s has no \"# --\" comment", r.Key)
		}
	}
}

func TestCells(t *testing.T) {
	if got := text("empty means <fullname>-x | y"); got != `empty means &lt;fullname&gt;-x \| y` {
		t.Errorf("text: %s", got)
	}
	if got := cell(`(^|/)x`); got != `(^\|/)x` {
		t.Errorf("cell: %s", got)
	}
	if got := badge("AppVersion", "v1.2.3-rc_1"); !strings.Contains(got, "badge/AppVersion-v1.2.3--rc__1-informational") {
		t.Errorf("badge: %s", got)
	}
}
