package dockerfile_test

// The tests of this file hold `make bundle-image` (hack/image bundle) to
// what it promises: the bundle image is what bundle.Dockerfile builds, byte
// for byte and label for label, and the same twice over.

import (
	"bytes"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

const bundleRef = "registry.example/kubefledged/kubefledged-bundle:test-tag"

// runImageTool runs hack/image from the repository root and returns the
// digest it prints.
func runImageTool(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(imageTool(t), args...)
	cmd.Dir = repoRoot(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/image %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return strings.TrimSpace(string(out))
}

// dockerfileBundle is what bundle.Dockerfile builds: labels, and COPY
// sources (in the repository) by destination (in the image).
func dockerfileBundle(t *testing.T) (labels map[string]string, copies map[string]string) {
	t.Helper()
	labels, copies = map[string]string{}, map[string]string{}
	for _, in := range parse(t, filepath.Join(repo, "bundle.Dockerfile")) {
		switch in.cmd {
		case "FROM":
			if in.args != "scratch" {
				t.Fatalf("bundle.Dockerfile:%d: FROM %s; the builder makes FROM scratch images", in.line, in.args)
			}
		case "LABEL":
			for _, kv := range strings.Fields(in.args) {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					t.Fatalf("bundle.Dockerfile:%d: LABEL %q", in.line, kv)
				}
				labels[k] = v
			}
		case "COPY":
			f := strings.Fields(in.args)
			if len(f) != 2 {
				t.Fatalf("bundle.Dockerfile:%d: COPY %s", in.line, in.args)
			}
			copies[path.Clean(f[1])] = f[0]
		default:
			t.Fatalf("bundle.Dockerfile:%d: %s, which this test does not know", in.line, in.cmd)
		}
	}
	return labels, copies
}

func TestBundleImage(t *testing.T) {
	dir := t.TempDir()
	first := runImageTool(t, "bundle", "-dir", "bundle", "-out", filepath.Join(dir, "1"), "-ref", bundleRef)
	second := runImageTool(t, "bundle", "-dir", "bundle", "-out", filepath.Join(dir, "2"), "-ref", bundleRef)
	if first != second {
		t.Errorf("two builds of one bundle gave two digests: %s and %s", first, second)
	}
	idx := (&built{layout: filepath.Join(dir, "1"), digest: first}).index(t)
	labels, copies := dockerfileBundle(t)

	// Every file each COPY brings, with its bytes, by its path in the image.
	want := map[string][]byte{}
	for dst, src := range copies {
		root := filepath.Join(repo, filepath.FromSlash(src))
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			data, err := os.ReadFile(p)
			want[path.Join(dst, filepath.ToSlash(rel))] = data
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, arch := range []string{"amd64", "arm64"} {
		t.Run(arch, func(t *testing.T) {
			want := maps.Clone(want)
			img := platformImage(t, idx, arch)
			if img == nil {
				t.Fatalf("no linux/%s image in the index", arch)
			}
			cf := configFile(t, img)
			if !maps.Equal(cf.Config.Labels, labels) {
				t.Errorf("labels %v\nwant bundle.Dockerfile's %v", cf.Config.Labels, labels)
			}
			if cf.OS != "linux" || cf.Architecture != arch || len(cf.Config.Entrypoint) > 0 || cf.Config.User != "" {
				t.Errorf("config: %s/%s, entrypoint %q, user %q; want linux/%s and none, as FROM scratch",
					cf.OS, cf.Architecture, cf.Config.Entrypoint, cf.Config.User, arch)
			}
			for p, f := range imageFiles(t, img) {
				if f.hdr.Typeflag == '5' {
					continue
				}
				data, ok := want[p]
				switch {
				case !ok:
					t.Errorf("%s is in the image, not in bundle/ under a COPY of bundle.Dockerfile", p)
				case !bytes.Equal(f.data, data):
					t.Errorf("%s differs from bundle/'s", p)
				case f.hdr.Mode != 0o644:
					t.Errorf("%s: mode %o, want 644", p, f.hdr.Mode)
				}
				delete(want, p)
			}
			for p := range want {
				t.Errorf("%s is missing from the image", p)
			}
		})
	}
}
