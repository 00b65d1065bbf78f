package main

// The whole program is tested in test/dockerfile, which builds the image;
// these are the parts that can go wrong without a build.

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"

	"github.com/kubefledged/kube-fledged/hack/image/lock"
	kfplatform "github.com/kubefledged/kube-fledged/internal/platform"
)

// A layer depends on its entries alone: not on their order, nor on the
// times of the files it copies.
func TestLayerIsReproducible(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "watches.yaml")
	if err := os.WriteFile(src, []byte("- kind: KubeFledged\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	epoch := time.Unix(1700000000, 0).UTC()
	entries := []entry{
		{name: "/opt/kubefledged/watches.yaml", mode: 0o644, src: src},
		{name: "/etc/passwd", mode: 0o644, data: []byte("root:x:0:0::/:\n")},
		{name: "/tmp", dir: true, mode: 0o1777},
	}
	first, err := layer(filepath.Join(dir, "1.tar"), epoch, entries...)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(src, time.Now(), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	slices.Reverse(entries)
	second, err := layer(filepath.Join(dir, "2.tar"), epoch, entries...)
	if err != nil {
		t.Fatal(err)
	}
	d1, err := first.Digest()
	if err != nil {
		t.Fatal(err)
	}
	d2, err := second.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if d1 != d2 {
		t.Errorf("one set of entries gave two layers, %s and %s", d1, d2)
	}

	rc, err := first.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var names []string
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if !h.ModTime.Equal(epoch) || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: time %s, owner %d:%d; want %s and root", h.Name, h.ModTime, h.Uid, h.Gid, epoch)
		}
		if h.Name == "tmp/" && h.Mode != 0o1777 {
			t.Errorf("tmp/: mode %o, want 1777", h.Mode)
		}
	}
	want := []string{"etc/", "etc/passwd", "opt/", "opt/kubefledged/", "opt/kubefledged/watches.yaml", "tmp/"}
	if !slices.Equal(names, want) {
		t.Errorf("entries %q, want %q (sorted, with their parents)", names, want)
	}
}

func TestIsLocal(t *testing.T) {
	for registry, want := range map[string]bool{
		"127.0.0.1:5000":         true,
		"127.0.0.1":              true,
		"localhost:5000":         true,
		"[::1]:5000":             true,
		"[::1]":                  true,
		"ghcr.io":                false,
		"10.0.0.5:5000":          false, // go-containerregistry's own rule covers private addresses
		"localhost.example:5000": false,
	} {
		if got := isLocal(registry); got != want {
			t.Errorf("isLocal(%q) = %v, want %v", registry, got, want)
		}
	}
}

func TestParsePlatforms(t *testing.T) {
	got, err := parsePlatforms("linux/amd64, linux/arm/v7")
	if err != nil {
		t.Fatal(err)
	}
	if want := []platform{{OS: "linux", Arch: "amd64"}, {OS: "linux", Arch: "arm", Variant: "v7"}}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	// The default of build and bundle: every platform the controller
	// serves, in the list's order.
	if got, err := parsePlatforms(kfplatform.List()); err != nil || !slices.Equal(got, kfplatform.Image()) {
		t.Errorf("the default %q parses to %v, %v", kfplatform.List(), got, err)
	}
	// arm without its variant, a variant the controller does not serve,
	// and an architecture it skips are refused here, not found on a node.
	for _, bad := range []string{"linux/arm", "linux/arm/v6", "linux/riscv64", "linux/386", "darwin/arm64", "linux/", "linux/amd64,linux/amd64", ""} {
		if _, err := parsePlatforms(bad); err == nil {
			t.Errorf("parsePlatforms(%q) accepted it", bad)
		}
	}
}

// A layer's modes come from whether a file may be run, never from the
// builder's umask; what COPY would copy differently is refused.
func TestRegularFiles(t *testing.T) {
	dir := t.TempDir()
	for name, mode := range map[string]os.FileMode{"run.sh": 0o700, "sub/data.yaml": 0o600} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, mode); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]string{}
	err := regularFiles(dir, func(p string, mode int64) error {
		rel, _ := filepath.Rel(dir, p)
		got[filepath.ToSlash(rel)] = fmt.Sprintf("%#o", mode)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"run.sh": "0755", "sub/data.yaml": "0644"}
	if !maps.Equal(got, want) {
		t.Errorf("modes %v, want %v", got, want)
	}

	if err := os.Symlink("run.sh", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	err = regularFiles(dir, func(string, int64) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "link: not a regular file") {
		t.Errorf("a symlink: %v, want it refused", err)
	}
}

// layoutIndex takes the one image index of a layout and its name, and says
// which command writes the layout it expected when it finds another.
func TestLayoutIndex(t *testing.T) {
	idx, err := random.Index(64, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	named := filepath.Join(t.TempDir(), "named")
	p, err := layout.Write(named, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{containerdName: "example.test/bundle:v1"})); err != nil {
		t.Fatal(err)
	}
	got, ref, err := layoutIndex(named, "image bundle")
	if err != nil {
		t.Fatal(err)
	}
	gd, _ := got.Digest()
	wd, _ := idx.Digest()
	if gd != wd || ref != "example.test/bundle:v1" {
		t.Errorf("got %s named %q, want %s named example.test/bundle:v1", gd, ref, wd)
	}

	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	flat := filepath.Join(t.TempDir(), "flat")
	if p, err = layout.Write(flat, empty.Index); err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]string{
		filepath.Join(t.TempDir(), "none"): "(run `image bundle` first)",
		flat:                               "want one image index in index.json, as `image bundle` writes",
	} {
		if _, _, err := layoutIndex(dir, "image bundle"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", filepath.Base(dir), err, want)
		}
	}
}

// The revision follows the binary's sources and nothing else: not its
// tests, nor files it does not link.
func TestLinkedFiles(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	files, err := linkedFiles(t.Context(), ".")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"main.go", filepath.Join("internal", "commands", "main.go"), filepath.Join("api", "v1alpha2", "imagecache_types.go")} {
		if !slices.Contains(files, want) {
			t.Errorf("the binary's sources lack %s", want)
		}
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || strings.HasPrefix(f, "test"+string(filepath.Separator)) || strings.HasPrefix(f, "hack"+string(filepath.Separator)) {
			t.Errorf("%s counted among the binary's sources", f)
		}
	}
}

func TestDigestFiles(t *testing.T) {
	t.Chdir(t.TempDir())
	write := func(name, data string) {
		if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	digest := func(files ...string) string {
		d, err := digestFiles(files)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	write("a", "ab")
	write("b", "c")
	first := digest("a", "b")
	if again := digest("b", "a", "a"); again != first {
		t.Errorf("order or repetition changed the revision: %s, then %s", first, again)
	}
	write("a", "a")
	write("b", "bc")
	if moved := digest("a", "b"); moved == first {
		t.Errorf("content moved from one file to the next kept the revision %s", first)
	}
	write("b", "c")
	write("a", "ab")
	if err := os.Rename("b", "c"); err != nil {
		t.Fatal(err)
	}
	if renamed := digest("a", "c"); renamed == first {
		t.Errorf("a renamed file kept the revision %s", first)
	}
	if _, err := digestFiles([]string{"missing"}); err == nil {
		t.Error("a missing file gave a revision")
	}
}

// The lock gives its digest only for the inputs it was recorded for; for
// others, -check fails naming the remedy instead of building.
func TestLockedDigest(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	file := filepath.Join(t.TempDir(), "digest.lock")
	out := filepath.Join(t.TempDir(), "oci")
	key, err := imageKey(t.Context(), "v1.0.0", kfplatform.Image())
	if err != nil {
		t.Fatal(err)
	}
	if other, err := imageKey(t.Context(), "v1.0.1", kfplatform.Image()); err != nil {
		t.Fatal(err)
	} else if other == key {
		t.Errorf("another version kept the key %s", key)
	}
	// make test runs the tests with GOFLAGS=-trimpath; goBuild sets its own.
	t.Setenv("GOFLAGS", "-trimpath")
	if same, err := imageKey(t.Context(), "v1.0.0", kfplatform.Image()); err != nil {
		t.Fatal(err)
	} else if same != key {
		t.Errorf("the caller's GOFLAGS changed the key: %s, then %s", key, same)
	}
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	idx := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: img,
		Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}})
	recorded, err := lock.FromIndex(key, idx)
	if err != nil {
		t.Fatal(err)
	}
	if err := lock.Write(file, recorded); err != nil {
		t.Fatal(err)
	}
	if got, err := lockedDigest(t.Context(), "v1.0.0", file, out, true); err != nil || got != recorded.Digest {
		t.Errorf("a lock recorded for these inputs gave %q, %v; want its digest %s", got, err, recorded.Digest)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a matching lock built anyway (%v)", err)
	}
	_, err = lockedDigest(t.Context(), "v1.0.1", file, out, true)
	if err == nil || !strings.Contains(err.Error(), "make bundle") {
		t.Errorf("a lock of other inputs with -check: %v, want an error naming make bundle", err)
	}
}
