package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The two calls OLM v0.38.0 makes of the util image's cp
// (pkg/controller/bundle/bundle_unpacker.go and
// pkg/controller/registry/reconciler/reconciler.go), and the directory copy
// -R promises.
func TestCopies(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "bin", "cpb")
	if err := os.MkdirAll(filepath.Dir(src), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src, []byte("#!cpb"), 0o755); err != nil {
		t.Fatal(err)
	}
	util := filepath.Join(dir, "util")
	if err := os.Mkdir(util, 0o755); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run([]string{"-Rv", src, filepath.Join(util, "cpb")}, &out); err != nil {
		t.Fatal(err)
	}
	checkFile(t, filepath.Join(util, "cpb"), "#!cpb", 0o755)
	if !strings.Contains(out.String(), "-> '"+filepath.Join(util, "cpb")+"'") {
		t.Errorf("-v printed %q", out.String())
	}

	// Into an existing directory, under the source's name.
	utilities := filepath.Join(dir, "utilities")
	if err := os.Mkdir(utilities, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{src, utilities}, &out); err != nil {
		t.Fatal(err)
	}
	checkFile(t, filepath.Join(utilities, "cpb"), "#!cpb", 0o755)

	// A tree, with -R only.
	if err := run([]string{filepath.Join(dir, "bin"), filepath.Join(dir, "copy")}, &out); err == nil {
		t.Error("a directory was copied without -R")
	}
	if err := run([]string{"-R", filepath.Join(dir, "bin"), filepath.Join(dir, "copy")}, &out); err != nil {
		t.Fatal(err)
	}
	checkFile(t, filepath.Join(dir, "copy", "cpb"), "#!cpb", 0o755)

	if err := run([]string{"-a", src, util}, &out); err == nil || !strings.Contains(err.Error(), "-a") {
		t.Errorf("an unknown flag gave %v, want an error naming it", err)
	}
}

func checkFile(t *testing.T, p, want string, mode os.FileMode) {
	t.Helper()
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s holds %q, want %q", p, got, want)
	}
	info, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != mode {
		t.Errorf("%s: mode %o, want %o", p, info.Mode().Perm(), mode)
	}
}
