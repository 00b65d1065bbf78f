package main

import (
	"bytes"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/registry"
)

var chartDir = filepath.Join("..", "..", "helm-charts", "kubefledged")

var pushTime = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// A registry in the test, over plain HTTP on 127.0.0.1, as the sandbox's.
func testRegistry(t *testing.T, h http.Handler) string {
	t.Helper()
	if h == nil {
		h = ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestPushThenPull(t *testing.T) {
	host := testRegistry(t, nil)
	var log bytes.Buffer
	res, err := Push(Options{Chart: chartDir, Repo: "oci://" + host + "/charts", Time: pushTime, OutDir: t.TempDir(), Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	want := host + "/charts/kubefledged:0.11.0"
	if res.Ref != want || !strings.Contains(log.String(), "Pushed: "+want) {
		t.Errorf("pushed %s, want %s (%s)", res.Ref, want, log.String())
	}

	// Helm pulls it back, and it is the chart.
	client, err := registry.NewClient(registry.ClientOptPlainHTTP())
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := client.Pull(want)
	if err != nil {
		t.Fatal(err)
	}
	chrt, err := loader.LoadArchive(bytes.NewReader(pulled.Chart.Data))
	if err != nil {
		t.Fatal(err)
	}
	local, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	if chrt.Metadata.Name != local.Metadata.Name || chrt.Metadata.Version != local.Metadata.Version {
		t.Errorf("pulled %s %s", chrt.Metadata.Name, chrt.Metadata.Version)
	}
	var files []string
	for _, f := range chrt.Raw {
		files = append(files, f.Name)
	}
	for _, f := range []string{"templates/tests/check.yaml", "templates/prometheusrule.yaml", "dashboards/kubefledged.json", "README.md", "values.schema.json", "crds/kubefledged.io_imagecaches.yaml"} {
		if !slices.Contains(files, f) {
			t.Errorf("the pushed chart lacks %s: %v", f, files)
		}
	}
	if slices.Contains(files, "README.md.gotmpl") {
		t.Error("the pushed chart carries the README's template")
	}

	// An OCI artifact of Helm's media types, dated as asked.
	ref, err := name.ParseReference(want, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.MediaType != registry.ConfigMediaType || len(m.Layers) != 1 || m.Layers[0].MediaType != registry.ChartLayerMediaType {
		t.Errorf("manifest %+v", m)
	}
	if got := m.Annotations["org.opencontainers.image.created"]; got != pushTime.Format(time.RFC3339) {
		t.Errorf("created %q", got)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(chartDir), "kubefledged-0.11.0.tgz")); err == nil {
		t.Error("the package was written next to the chart")
	}
}

// One chart and one time give one digest, whenever it is pushed.
func TestPushIsReproducible(t *testing.T) {
	host := testRegistry(t, nil)
	push := func(repo string, at time.Time) string {
		t.Helper()
		time.Sleep(1100 * time.Millisecond) // Helm stamps entries with the clock's second
		res, err := Push(Options{Chart: chartDir, Repo: "oci://" + host + "/" + repo, Time: at})
		if err != nil {
			t.Fatal(err)
		}
		return res.Manifest.Digest
	}
	a, b := push("a", pushTime), push("b", pushTime)
	if a != b {
		t.Errorf("two pushes of one chart: %s and %s", a, b)
	}
	if c := push("c", pushTime.Add(time.Hour)); c == a {
		t.Error("another time, the same digest")
	}
}

func TestPushFails(t *testing.T) {
	refuse := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/v2/" {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusForbidden)
	})
	for _, tt := range []struct{ name, repo, want string }{
		{"no scheme", testRegistry(t, nil) + "/charts", "is not oci://REGISTRY/PATH"},
		{"no path", "oci://" + testRegistry(t, nil), "is not oci://REGISTRY/PATH"},
		{"refused", "oci://" + testRegistry(t, refuse) + "/charts", "403"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Push(Options{Chart: chartDir, Repo: tt.repo, Time: pushTime})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err %v, want %q", err, tt.want)
			}
		})
	}
	if _, err := Push(Options{Chart: filepath.Join(t.TempDir(), "none"), Repo: "oci://127.0.0.1:1/x", Time: pushTime}); err == nil {
		t.Error("a missing chart pushed")
	}
}

func TestLoopback(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1:5000": true, "localhost:5000": true, "localhost": true, "[::1]:5000": true,
		"ghcr.io": false, "registry.example:5000": false, "10.0.0.1:5000": false,
	} {
		if got := loopback(host); got != want {
			t.Errorf("%s: %v", host, got)
		}
	}
}
