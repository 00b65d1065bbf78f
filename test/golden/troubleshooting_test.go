package golden

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// kubernetesWords are names docs/troubleshooting.md quotes that are
// Kubernetes' own (the kubelet's Events and conditions, the Job
// controller's Event), not ours: our source has no reason to spell them.
var kubernetesWords = map[string]bool{
	"FreeDiskSpaceFailed": true, // kubelet Event: image GC could not free enough
	"ImageGCFailed":       true, // kubelet Event
	"DiskPressure":        true, // node condition
	"FailedCreate":        true, // Job controller Event: a pod create refused
}

// troubleshootingName picks the names worth checking out of a Markdown text's code
// spans: reasons and Events (CamelCase), metrics, alerts, flags.
var troubleshootingName = regexp.MustCompile("`(kubefledged_[a-z_]+|KubeFledged[A-Za-z]+|--[a-z][a-z0-9-]+|[A-Z][a-z]+(?:[A-Z][A-Za-z]*)+|[A-Z][a-z]+[A-Z]+[a-z]*)`")

// TestTroubleshootingNames holds every reason, Event, metric, alert and
// flag the troubleshooting page quotes to one the product spells: a name
// that is renamed, or was never ours, would send a reader grepping for
// nothing at 3 a.m.
func TestTroubleshootingNames(t *testing.T) {
	page, err := os.ReadFile(repoFile("docs", "troubleshooting.md"))
	if err != nil {
		t.Fatal(err)
	}
	var source strings.Builder
	for _, dir := range []string{"api", "internal", filepath.Join("helm-charts", "kubefledged")} {
		err := filepath.WalkDir(repoFile(dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			if strings.HasSuffix(path, "_test.go") || !strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, ".yaml") && !strings.HasSuffix(path, ".tpl") {
				return nil
			}
			b, err := os.ReadFile(path)
			source.Write(b)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	src := source.String()
	names := map[string]bool{}
	for _, m := range troubleshootingName.FindAllStringSubmatch(string(page), -1) {
		names[m[1]] = true
	}
	if len(names) < 10 {
		t.Fatalf("only %d names found in docs/troubleshooting.md: has the page's form changed?", len(names))
	}
	for name := range names {
		if kubernetesWords[name] || strings.HasPrefix(name, "Test") {
			continue
		}
		if !strings.Contains(src, name) {
			t.Errorf("docs/troubleshooting.md quotes `%s`, which api/, internal/ and the chart never spell: correct the page, or, for a name that is Kubernetes' own, add it to kubernetesWords", name)
		}
	}
}
