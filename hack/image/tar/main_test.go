package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type item struct {
	name string
	typ  byte
	mode int64
	data string
}

// archive writes items as a gzipped tar into dir and returns its path.
func archive(t *testing.T, dir string, items ...item) string {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, it := range items {
		h := &tar.Header{Name: it.name, Typeflag: it.typ, Mode: it.mode, Size: int64(len(it.data))}
		if it.typ == tar.TypeSymlink {
			h.Linkname, h.Size = it.data, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			if _, err := tw.Write([]byte(it.data)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "bundle.tar.gz")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The call operator-sdk v1.42.2's scorecard makes (internal/scorecard/
// testpod.go), on an archive shaped as its WritePathsToTar writes one:
// names relative to the bundle, each directory before its files.
func TestScorecardUntar(t *testing.T) {
	dir := t.TempDir()
	a := archive(t, dir,
		item{name: "manifests", typ: tar.TypeDir, mode: 0o755},
		item{name: "manifests/csv.yaml", typ: tar.TypeReg, mode: 0o644, data: "kind: ClusterServiceVersion\n"},
		item{name: "metadata", typ: tar.TypeDir, mode: 0o755},
		item{name: "metadata/annotations.yaml", typ: tar.TypeReg, mode: 0o600, data: "annotations: {}\n"},
		// A file whose directory has no entry of its own.
		item{name: "tests/scorecard/config.yaml", typ: tar.TypeReg, mode: 0o644, data: "kind: Configuration\n"},
	)
	out := filepath.Join(dir, "scorecard-bundle")
	if err := os.Mkdir(out, 0o777); err != nil {
		t.Fatal(err)
	}
	var listed bytes.Buffer
	if err := run([]string{"xvzf", a, "-C", out}, &listed); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{
		"manifests/csv.yaml":          "kind: ClusterServiceVersion\n",
		"metadata/annotations.yaml":   "annotations: {}\n",
		"tests/scorecard/config.yaml": "kind: Configuration\n",
	} {
		got, err := os.ReadFile(filepath.Join(out, p))
		if err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", p, got, err, want)
		}
	}
	if info, err := os.Stat(filepath.Join(out, "metadata/annotations.yaml")); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("metadata/annotations.yaml: %v, %v; want mode 0600 from the archive", info, err)
	}
	if got := strings.Count(listed.String(), "\n"); got != 5 {
		t.Errorf("v listed %d entries, want 5:\n%s", got, listed.String())
	}

	// The dash form, into the working directory, quietly.
	again := t.TempDir()
	t.Chdir(again)
	listed.Reset()
	if err := run([]string{"-xzf", a}, &listed); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(again, "manifests", "csv.yaml")); err != nil {
		t.Error(err)
	}
	if listed.Len() != 0 {
		t.Errorf("without v it printed %q", listed.String())
	}
}

func TestRefused(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		what  string
		items []item
		args  func(a string) []string
		want  string
	}{
		{"a name climbing out", []item{{name: "../evil", typ: tar.TypeReg, mode: 0o644, data: "x"}},
			func(a string) []string { return []string{"xzf", a, "-C", dir} }, "leaves the target directory"},
		{"an absolute name", []item{{name: "/etc/evil", typ: tar.TypeReg, mode: 0o644, data: "x"}},
			func(a string) []string { return []string{"xzf", a, "-C", dir} }, "leaves the target directory"},
		{"a symlink", []item{{name: "link", typ: tar.TypeSymlink, data: "/etc"}},
			func(a string) []string { return []string{"xzf", a, "-C", dir} }, "not a directory or a regular file"},
		{"creating", nil, func(a string) []string { return []string{"czf", a} }, "unsupported function letter"},
		{"listing", nil, func(a string) []string { return []string{"tzf", a} }, "unsupported function letter"},
		{"no archive", nil, func(string) []string { return []string{"xzf"} }, "usage"},
		{"another flag", nil, func(a string) []string { return []string{"xzf", a, "--strip-components=1"} }, "unsupported argument"},
		{"-C without a directory", nil, func(a string) []string { return []string{"xzf", a, "-C"} }, "unsupported argument"},
	} {
		t.Run(tc.what, func(t *testing.T) {
			a := archive(t, t.TempDir(), tc.items...)
			err := run(tc.args(a), &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "evil")); err == nil {
		t.Error("../evil was written outside the directory")
	}
}
