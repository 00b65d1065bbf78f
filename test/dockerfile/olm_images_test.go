package dockerfile_test

// The tests of this file hold `make bundle-image` and `make catalog-image`
// (hack/image bundle and catalog) to what they promise: the bundle image is
// what bundle.Dockerfile builds, byte for byte and label for label; the
// catalog image holds a catalog opm validates and serves, names the bundles
// as given, and carries the upgrade edges; and both are the same twice
// over.

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/kubefledged/kube-fledged/internal/platform"
	"github.com/kubefledged/kube-fledged/test/olmbundle"
)

const (
	bundleRef  = "registry.example/kubefledged/kubefledged-bundle:test-tag"
	catalogRef = "registry.example/kubefledged/kubefledged-catalog:test-tag"
)

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
	for _, in := range parse(t, filepath.Join(repoDir, "bundle.Dockerfile")) {
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
		root := filepath.Join(repoDir, filepath.FromSlash(src))
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
	// The bundle's index has an image for every platform our image does:
	// containerd on an s390x node unpacks only an image it can match.
	for _, arch := range platform.Arches() {
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

// olmTools are the binaries the catalog is built with, or a skip naming the
// make target that builds them.
func olmTools(t *testing.T) (opm, probe string) {
	t.Helper()
	bin := filepath.Join(repoRoot(t), "bin")
	if d := os.Getenv("KUBEFLEDGED_BIN_DIR"); d != "" {
		bin = d
	}
	opm, probe = filepath.Join(bin, "opm"), filepath.Join(bin, "grpc_health_probe")
	for _, f := range []string{opm, probe} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("%s is not built (make %s): the catalog image is rendered with opm and serves with both", f, f)
		}
	}
	return opm, probe
}

type catalogBlob struct {
	Schema         string `json:"schema"`
	Name           string `json:"name"`
	Package        string `json:"package"`
	Image          string `json:"image"`
	DefaultChannel string `json:"defaultChannel"`
	Entries        []struct {
		Name     string `json:"name"`
		Replaces string `json:"replaces"`
	} `json:"entries"`
}

func TestCatalogImage(t *testing.T) {
	opm, probe := olmTools(t)
	dir := t.TempDir()
	bundle1 := filepath.Join(dir, "bundle-1")
	runImageTool(t, "bundle", "-dir", "bundle", "-out", bundle1, "-ref", bundleRef)
	catalog := func(out string, bundles ...string) string {
		args := []string{"catalog", "-out", out, "-ref", catalogRef, "-opm", opm, "-probe", probe}
		for _, b := range bundles {
			args = append(args, "-bundle", b)
		}
		return runImageTool(t, args...)
	}
	first := catalog(filepath.Join(dir, "catalog-1"), bundle1)
	second := catalog(filepath.Join(dir, "catalog-1b"), bundle1)
	if first != second {
		t.Errorf("two builds of one catalog gave two digests: %s and %s", first, second)
	}
	blobs := checkCatalog(t, opm, &built{layout: filepath.Join(dir, "catalog-1"), digest: first})
	want := []string{"olm.package kube-fledged", "olm.channel stable: kube-fledged.v0.11.0", "olm.bundle kube-fledged.v0.11.0 " + bundleRef}
	if got := describe(blobs); !slices.Equal(got, want) {
		t.Errorf("the catalog holds %q, want %q", got, want)
	}
	if blobs[0].DefaultChannel != "stable" {
		t.Errorf("default channel %q, want stable", blobs[0].DefaultChannel)
	}

	// A second version that replaces the first: the channel carries the edge.
	src2 := filepath.Join(dir, "src-2")
	if _, err := olmbundle.Derive(filepath.Join(repoDir, "bundle"), src2, olmbundle.Options{Version: "0.11.1", Replaces: "kube-fledged.v0.11.0"}); err != nil {
		t.Fatal(err)
	}
	bundle2 := filepath.Join(dir, "bundle-2")
	ref2 := strings.TrimSuffix(bundleRef, "test-tag") + "test-tag-2"
	runImageTool(t, "bundle", "-dir", src2, "-out", bundle2, "-ref", ref2)
	upgrade := catalog(filepath.Join(dir, "catalog-2"), bundle1, bundle2)
	blobs = checkCatalog(t, opm, &built{layout: filepath.Join(dir, "catalog-2"), digest: upgrade})
	want = []string{"olm.package kube-fledged", "olm.channel stable: kube-fledged.v0.11.0, kube-fledged.v0.11.1 replaces kube-fledged.v0.11.0",
		"olm.bundle kube-fledged.v0.11.0 " + bundleRef, "olm.bundle kube-fledged.v0.11.1 " + ref2}
	if got := describe(blobs); !slices.Equal(got, want) {
		t.Errorf("the upgrade catalog holds %q, want %q", got, want)
	}
}

// checkCatalog checks the image's shape, unpacks its catalog, has opm
// validate it and load it as `opm serve` does, and returns its blobs.
func checkCatalog(t *testing.T, opm string, b *built) []catalogBlob {
	t.Helper()
	idx := b.index(t)
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Platform == nil {
		t.Fatalf("the catalog index lists %d images; want one, for the platform of bin/opm", len(m.Manifests))
	}
	img := platformImage(t, idx, m.Manifests[0].Platform.Architecture)
	cf := configFile(t, img)
	if got := cf.Config.Labels["operators.operatorframework.io.index.configs.v1"]; got != "/configs" {
		t.Errorf("configs label %q, want /configs", got)
	}
	wantCmd := []string{"serve", "/configs"}
	if !slices.Equal(cf.Config.Entrypoint, []string{"/bin/opm"}) || !slices.Equal(cf.Config.Cmd, wantCmd) || cf.Config.User != "1001" {
		t.Errorf("entrypoint %q, cmd %q, user %q; want [/bin/opm], %q, 1001 as upstream's index images (less the cache)",
			cf.Config.Entrypoint, cf.Config.Cmd, cf.Config.User, wantCmd)
	}
	files := imageFiles(t, img)
	bin, err := os.ReadFile(opm)
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := files["/bin/opm"]; !ok || !bytes.Equal(f.data, bin) || f.hdr.Mode != 0o755 {
		t.Error("/bin/opm is not bin/opm, mode 755")
	}
	if _, ok := files["/bin/grpc_health_probe"]; !ok {
		t.Error("no /bin/grpc_health_probe, which the registry pod's probes run")
	}
	if f := files["/tmp"]; f.hdr == nil || f.hdr.Mode != 0o1777 {
		t.Error("/tmp is not world-writable with the sticky bit")
	}

	out := t.TempDir()
	var catalogJSON []byte
	for p, f := range files {
		if strings.HasPrefix(p, "/tmp/") {
			t.Errorf("%s is in the image: the serve cache is not reproducible, and the registry pod builds it", p)
		}
		if f.hdr.Typeflag == '5' || !strings.HasPrefix(p, "/configs/") {
			continue
		}
		to := filepath.Join(out, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, f.data, 0o644); err != nil {
			t.Fatal(err)
		}
		if p == "/configs/kube-fledged/catalog.json" {
			catalogJSON = f.data
		}
	}
	if catalogJSON == nil {
		t.Fatal("no /configs/kube-fledged/catalog.json in the image")
	}
	configs := filepath.Join(out, "configs")
	if o, err := exec.Command(opm, "validate", configs).CombinedOutput(); err != nil {
		t.Errorf("opm validate of the image's /configs: %v\n%s", err, o)
	}
	// What the registry pod's `opm serve` does first: load the catalog into
	// its cache.
	if o, err := exec.Command(opm, "serve", configs, "--cache-dir="+filepath.Join(out, "cache"), "--cache-only").CombinedOutput(); err != nil {
		t.Errorf("opm serve --cache-only of the image's /configs: %v\n%s", err, o)
	}

	var blobs []catalogBlob
	dec := json.NewDecoder(bytes.NewReader(catalogJSON))
	for {
		var blob catalogBlob
		if err := dec.Decode(&blob); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		blobs = append(blobs, blob)
	}
	return blobs
}

// describe says what each blob is, in one line.
func describe(blobs []catalogBlob) []string {
	var out []string
	for _, b := range blobs {
		switch b.Schema {
		case "olm.channel":
			var entries []string
			for _, e := range b.Entries {
				s := e.Name
				if e.Replaces != "" {
					s += " replaces " + e.Replaces
				}
				entries = append(entries, s)
			}
			out = append(out, b.Schema+" "+b.Name+": "+strings.Join(entries, ", "))
		case "olm.bundle":
			out = append(out, b.Schema+" "+b.Name+" "+b.Image)
		default:
			out = append(out, b.Schema+" "+b.Name)
		}
	}
	return out
}

// The images OLM's catalog operator starts its Jobs and pods from, and the
// one operator-sdk scorecard runs its tests in: what OLM v0.38.0 and
// operator-sdk run in them is where they expect it, and runs as 1001.
func TestOLMToolImages(t *testing.T) {
	opm, probe := olmTools(t)
	bin := filepath.Dir(opm)
	cpb, scorecardTest := filepath.Join(bin, "cpb"), filepath.Join(bin, "scorecard-test")
	dir := t.TempDir()
	for _, c := range []struct {
		kind  string
		args  []string
		needs []string
		files map[string]string // path in the image: the binary it must be, or "" for any
		// entry is the entry point; none where the pod gives the command, or
		// (scorecard's untar container) arguments only.
		entry []string
	}{
		{"opm", []string{"-opm", opm, "-probe", probe}, nil,
			map[string]string{"/bin/opm": opm, "/bin/grpc_health_probe": probe}, []string{"/bin/opm"}},
		{"util", []string{"-cpb", cpb}, []string{cpb}, map[string]string{"/bin/cpb": cpb, "/bin/cp": ""}, nil},
		{"scorecard", []string{"-test", scorecardTest}, []string{scorecardTest},
			map[string]string{"/usr/local/bin/scorecard-test": scorecardTest, "/bin/tar": ""}, nil},
	} {
		t.Run(c.kind, func(t *testing.T) {
			for _, n := range c.needs {
				if _, err := os.Stat(n); err != nil {
					t.Skipf("%s is not built (make olm-e2e-tools): the %s image holds it", n, c.kind)
				}
			}
			out := filepath.Join(dir, c.kind)
			digest := runImageTool(t, append([]string{c.kind, "-out", out, "-ref", "registry.example/olm/" + c.kind + ":test-tag"}, c.args...)...)
			idx := (&built{layout: out, digest: digest}).index(t)
			img := platformImage(t, idx, runtime.GOARCH)
			if img == nil {
				t.Fatalf("no linux/%s image: the tools in bin/ are for this host", runtime.GOARCH)
			}
			cf := configFile(t, img)
			if u := cf.Config.User; u != "1001" {
				t.Errorf("user %q, want 1001 as upstream's", u)
			}
			if !slices.Equal(cf.Config.Entrypoint, c.entry) {
				t.Errorf("entry point %q, want %q", cf.Config.Entrypoint, c.entry)
			}
			files := imageFiles(t, img)
			for p, bin := range c.files {
				f, ok := files[p]
				if !ok || f.hdr.Mode != 0o755 {
					t.Errorf("%s missing, or not mode 755", p)
					continue
				}
				if bin == "" {
					continue
				}
				want, err := os.ReadFile(bin)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(f.data, want) {
					t.Errorf("%s is not %s", p, bin)
				}
			}
		})
	}
}
