package dockerfile_test

// The tests of this file keep `make image` (hack/image, which builds the
// image without Docker) true to the Dockerfile and to what it promises: one
// digest per commit, the platforms and labels, and a push a registry
// accepts. Building the image compiles the binary for two architectures, so
// the tests share one build; the reproducibility test makes the second.

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	"sigs.k8s.io/yaml"

	"github.com/kubefledged/kube-fledged/hack/image/lock"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/platform"
	"github.com/kubefledged/kube-fledged/test/framework/repo"
)

// testRef names the image in the layouts the tests build.
const testRef = "registry.example/kubefledged/kubefledged:test-tag"

// wantPlatforms are what the index must hold: every platform of
// internal/platform, the list the controller serves nodes of, sorted as the
// test sorts the index's.
func wantPlatforms() []string {
	var out []string
	for _, p := range platform.Image() {
		out = append(out, p.String())
	}
	slices.Sort(out)
	return out
}

// testPlatforms are the platforms the tests build the image for: this
// machine's alone, unless IMAGE_TEST_PLATFORMS=all (`make test-image`) asks
// for every one. A platform is one cross-compile, minutes on a new machine,
// and `make bundle` builds them all whenever the image's inputs change
// (hack/image/lock), so `make test` checks this machine's against that
// record (TestDigestLock) rather than building the other four again.
func testPlatforms(t *testing.T) []string {
	t.Helper()
	switch v := os.Getenv("IMAGE_TEST_PLATFORMS"); v {
	case "all":
		return wantPlatforms()
	case "":
		host := "linux/" + runtime.GOARCH
		if !slices.Contains(wantPlatforms(), host) {
			t.Skipf("this machine's platform %s is none the image is built for (%v)", host, wantPlatforms())
		}
		return []string{host}
	default:
		t.Fatalf("IMAGE_TEST_PLATFORMS=%q: want all, or nothing for this machine's platform", v)
		return nil
	}
}

// The ELF machine and byte order of each architecture's binary: a binary
// for another machine would be refused by the node's kernel only when the
// Job starts.
var elfMachine = map[string]struct {
	machine elf.Machine
	order   binary.ByteOrder
}{
	"amd64":   {elf.EM_X86_64, binary.LittleEndian},
	"arm64":   {elf.EM_AARCH64, binary.LittleEndian},
	"arm":     {elf.EM_ARM, binary.LittleEndian},
	"ppc64le": {elf.EM_PPC64, binary.LittleEndian},
	"s390x":   {elf.EM_S390, binary.BigEndian},
}

// What stands in for the distroless base: files in the image that no COPY
// of the Dockerfile brings.
var baseFiles = []string{"/etc/passwd", "/etc/group"}

type built struct {
	layout string // the OCI layout directory
	digest string // as the program printed it
}

var (
	shared struct {
		once sync.Once
		dir  string // removed by TestMain
		tool string // hack/image, built once
		err  error
	}
	builds [2]struct {
		once sync.Once
		b    *built
		err  error
	}
)

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

func requireGo(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not on PATH: these tests compile the binary and the image with it")
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(repoDir)
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// imageTool is hack/image, built once for every test of the package.
func imageTool(t *testing.T) string {
	t.Helper()
	requireGo(t)
	shared.once.Do(func() {
		if shared.dir, shared.err = os.MkdirTemp("", "kubefledged-image-test-"); shared.err != nil {
			return
		}
		shared.tool = filepath.Join(shared.dir, "image")
		shared.err = repo.Build(context.Background(), "./hack/image", shared.tool)
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.tool
}

// builtImage is the image as `make image` builds it; n is 0 for the build
// every test shares, 1 for the second the reproducibility test needs.
func builtImage(t *testing.T, n int) *built {
	t.Helper()
	root, version, tool, platforms := repoRoot(t), "v"+makeVersion(t), imageTool(t), testPlatforms(t)
	b := &builds[n]
	b.once.Do(func() {
		start := time.Now()
		out := filepath.Join(shared.dir, fmt.Sprintf("build-%d", n))
		cmd := exec.Command(tool, "build", "-out", filepath.Join(out, "oci"),
			"-digest-file", filepath.Join(out, "digest"), "-version", version, "-ref", testRef,
			"-platforms", strings.Join(platforms, ","))
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.Output()
		if err != nil {
			b.err = fmt.Errorf("hack/image build: %v\n%s", err, stderr.Bytes())
			return
		}
		digest := strings.TrimSpace(string(stdout))
		file, err := os.ReadFile(filepath.Join(out, "digest"))
		if err != nil {
			b.err = err
			return
		}
		if got := strings.TrimSpace(string(file)); got != digest {
			b.err = fmt.Errorf("the digest file says %s, the output %s", got, digest)
			return
		}
		b.b = &built{layout: filepath.Join(out, "oci"), digest: digest}
		t.Logf("image build %d: %s in %s", n, digest, time.Since(start).Round(time.Second))
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.b
}

// index is the image index the layout's index.json names, checked to be
// the one the build printed.
func (b *built) index(t *testing.T) v1.ImageIndex {
	t.Helper()
	lp, err := layout.FromPath(b.layout)
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 {
		t.Fatalf("index.json lists %d entries, want the one image index", len(m.Manifests))
	}
	d := m.Manifests[0]
	if d.MediaType != types.OCIImageIndex {
		t.Errorf("index.json names a %s, want an OCI image index", d.MediaType)
	}
	if d.Digest.String() != b.digest {
		t.Errorf("index.json names %s, the build printed %s", d.Digest, b.digest)
	}
	if got := d.Annotations["org.opencontainers.image.ref.name"]; got != "test-tag" {
		t.Errorf("index.json names the index %q, want the tag of -ref (test-tag)", got)
	}
	idx, err := top.ImageIndex(d.Digest)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// platformImage is the image of idx for linux/arch, or nil.
func platformImage(t *testing.T, idx v1.ImageIndex, arch string) v1.Image {
	t.Helper()
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.OS == "linux" && d.Platform.Architecture == arch {
			img, err := idx.Image(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			return img
		}
	}
	return nil
}

type imageFile struct {
	hdr  *tar.Header
	data []byte
}

// imageFiles is the image's filesystem, every layer applied, by absolute path.
func imageFiles(t *testing.T, img v1.Image) map[string]imageFile {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	files := map[string]imageFile{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[path.Clean("/"+h.Name)] = imageFile{hdr: h, data: data}
	}
}

func configFile(t *testing.T, img v1.Image) *v1.ConfigFile {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	return cf
}

func TestImageIsReproducible(t *testing.T) {
	a, b := builtImage(t, 0), builtImage(t, 1)
	if a.digest == b.digest {
		return
	}
	t.Errorf("two builds of one tree gave two digests: %s and %s", a.digest, b.digest)
	// Name the blobs that differ; the small ones are JSON, worth showing.
	blobs := func(b *built) map[string][]byte {
		out := map[string][]byte{}
		dir := filepath.Join(b.layout, "blobs", "sha256")
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			info, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			var content []byte
			if info.Size() < 16<<10 {
				if content, err = os.ReadFile(filepath.Join(dir, e.Name())); err != nil {
					t.Fatal(err)
				}
			}
			out[e.Name()] = content
		}
		return out
	}
	ba, bb := blobs(a), blobs(b)
	for _, pair := range []struct {
		name       string
		this, that map[string][]byte
	}{{"first", ba, bb}, {"second", bb, ba}} {
		for h, content := range pair.this {
			if _, ok := pair.that[h]; !ok {
				t.Logf("only in the %s build: %s %s", pair.name, h, content)
			}
		}
	}
}

func TestImageLayout(t *testing.T) {
	b := builtImage(t, 0)
	idx := b.index(t)
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range m.Manifests {
		if d.Platform == nil {
			t.Fatalf("manifest %s has no platform in the index", d.Digest)
		}
		platforms = append(platforms, d.Platform.String())
		if d.MediaType != types.OCIManifestSchema1 {
			t.Errorf("%s: a %s, want an OCI image manifest", d.Platform, d.MediaType)
		}
	}
	slices.Sort(platforms)
	if want := testPlatforms(t); !slices.Equal(platforms, want) {
		t.Fatalf("the index is for %v, want exactly %v", platforms, want)
	}
	labels := wantLabels(t)
	for k, v := range labels {
		if got := m.Annotations[k]; got != v {
			t.Errorf("index annotation %s = %q, want %q", k, got, v)
		}
	}

	for _, d := range m.Manifests {
		arch, variant := d.Platform.Architecture, d.Platform.Variant
		t.Run(d.Platform.String(), func(t *testing.T) {
			img := platformImage(t, idx, arch)
			cf := configFile(t, img)
			if cf.OS != "linux" || cf.Architecture != arch || cf.Variant != variant {
				t.Errorf("the config is for %s/%s/%s, the index says %s", cf.OS, cf.Architecture, cf.Variant, d.Platform)
			}
			for k, v := range labels {
				if got := cf.Config.Labels[k]; got != v {
					t.Errorf("label %s = %q, want %q", k, got, v)
				}
			}
			files := imageFiles(t, img)
			checkBinary(t, files, arch, variant)
			checkUsers(t, cf, files)
			// Every entry at the commit's time, root's unless 65532 must
			// write to it: the running user cannot change the product.
			for p, f := range files {
				if !f.hdr.ModTime.Equal(cf.Created.Time) {
					t.Errorf("%s: time %s, want the image's %s", p, f.hdr.ModTime, cf.Created.Time)
				}
				if (f.hdr.Uid != 0 || f.hdr.Gid != 0) && p != envValue(cf, "HOME") {
					t.Errorf("%s: owned by %d:%d, want root", p, f.hdr.Uid, f.hdr.Gid)
				}
			}
		})
	}
}

// wantLabels are the OCI labels every image and the index carry.
func wantLabels(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoDir, "helm-charts", "kubefledged", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		Description string `json:"description"`
		Home        string `json:"home"`
	}
	if err := yaml.Unmarshal(raw, &chart); err != nil {
		t.Fatal(err)
	}
	// No LICENSE file; the source headers name the licence.
	boilerplate, err := os.ReadFile(filepath.Join(repoDir, "hack", "boilerplate.go.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(boilerplate), "Apache License, Version 2.0") {
		t.Errorf("hack/boilerplate.go.txt no longer names the Apache License 2.0: update hack/image's licence label and this test")
	}
	// SOURCE_DATE_EPOCH's time, else 1970: never the commit's, whose time and
	// hash the image must not hold, since the bundle pins its digest.
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	if epoch == "" {
		epoch = "0"
	}
	sec, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	created := time.Unix(sec, 0)
	return map[string]string{
		"org.opencontainers.image.title":       "kube-fledged",
		"org.opencontainers.image.description": chart.Description,
		"org.opencontainers.image.source":      chart.Home,
		"org.opencontainers.image.version":     "v" + makeVersion(t),
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.created":     created.UTC().Format(time.RFC3339),
	}
}

// checkBinary: a static executable of the platform's machine at the path
// the Jobs call, built for the ARM level the variant names; on this
// machine's platform, one that runs and reports the release version.
func checkBinary(t *testing.T, files map[string]imageFile, arch, variant string) {
	t.Helper()
	bin, ok := files[jobs.HelperBinary]
	if !ok {
		t.Fatalf("no %s", jobs.HelperBinary)
	}
	if bin.hdr.Typeflag != tar.TypeReg || bin.hdr.Mode&0o111 == 0 {
		t.Errorf("%s: type %c, mode %o: want an executable file", jobs.HelperBinary, bin.hdr.Typeflag, bin.hdr.Mode)
	}
	f, err := elf.NewFile(bytes.NewReader(bin.data))
	if err != nil {
		t.Fatalf("%s: %v", jobs.HelperBinary, err)
	}
	want, ok := elfMachine[arch]
	if !ok {
		t.Fatalf("linux/%s: no ELF machine known to this test; add it to elfMachine", arch)
	}
	if f.Machine != want.machine || f.ByteOrder != want.order {
		t.Errorf("%s: machine %s (%s), want %s (%s)", jobs.HelperBinary, f.Machine, f.ByteOrder, want.machine, want.order)
	}
	// GOARM is in the binary's build settings: an arm/v7 entry must hold
	// a GOARM=7 binary, which runs on every ARMv7 node.
	info, err := buildinfo.Read(bytes.NewReader(bin.data))
	if err != nil {
		t.Fatalf("%s: %v", jobs.HelperBinary, err)
	}
	goarm := ""
	for _, s := range info.Settings {
		if s.Key == "GOARM" {
			goarm = s.Value
		}
	}
	if wantARM := strings.TrimPrefix(variant, "v"); arch == "arm" && goarm != wantARM {
		t.Errorf("%s: GOARM=%q, want %q for arm/%s", jobs.HelperBinary, goarm, wantARM, variant)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked", jobs.HelperBinary)
		}
	}
	// kubefledged_build_info's revision: the digest of this checkout's
	// sources, as `image revision` computes it, stamped by -X.
	if rev := sourceRevision(t); !bytes.Contains(bin.data, []byte(rev)) {
		t.Errorf("%s does not carry the sources' revision %s", jobs.HelperBinary, rev)
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != arch {
		return
	}
	exe := filepath.Join(t.TempDir(), "kubefledged")
	if err := os.WriteFile(exe, bin.data, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(exe, "version").Output()
	if err != nil {
		t.Fatalf("kubefledged version: %v", err)
	}
	if got, want := strings.TrimSpace(string(out)), "v"+makeVersion(t); got != want {
		t.Errorf("kubefledged version says %q, want %q", got, want)
	}
}

var revision struct {
	once sync.Once
	rev  string
	err  error
}

// sourceRevision is what `image revision` prints for this checkout.
func sourceRevision(t *testing.T) string {
	t.Helper()
	tool, root := imageTool(t), repoRoot(t)
	revision.once.Do(func() {
		cmd := exec.Command(tool, "revision")
		cmd.Dir = root
		out, err := cmd.Output()
		revision.rev, revision.err = strings.TrimSpace(string(out)), err
	})
	if revision.err != nil {
		t.Fatalf("image revision: %v", revision.err)
	}
	if !regexp.MustCompile(`^src-[0-9a-f]{12}$`).MatchString(revision.rev) {
		t.Fatalf("image revision printed %q, want src- and 12 hex digits", revision.rev)
	}
	return revision.rev
}

// checkUsers: the parts of distroless/static:nonroot the product needs
// (the user 65532 named, its home, a /tmp it can write).
func checkUsers(t *testing.T, cf *v1.ConfigFile, files map[string]imageFile) {
	t.Helper()
	home := envValue(cf, "HOME")
	if !strings.Contains(string(files["/etc/passwd"].data), "\nnonroot:x:65532:65532:nonroot:"+home+":") {
		t.Errorf("/etc/passwd does not name nonroot 65532 with home %q:\n%s", home, files["/etc/passwd"].data)
	}
	if !strings.Contains(string(files["/etc/group"].data), "\nnonroot:x:65532:\n") {
		t.Errorf("/etc/group does not name nonroot 65532:\n%s", files["/etc/group"].data)
	}
	for _, dir := range []string{"/tmp", home} {
		f, ok := files[dir]
		if !ok || f.hdr.Typeflag != tar.TypeDir {
			t.Errorf("no directory %s", dir)
			continue
		}
		writable := f.hdr.Mode&0o002 != 0 || (f.hdr.Uid == 65532 && f.hdr.Mode&0o200 != 0)
		if !writable {
			t.Errorf("%s: mode %o, owner %d: 65532 cannot write to it", dir, f.hdr.Mode, f.hdr.Uid)
		}
	}
	if files["/tmp"].hdr != nil && files["/tmp"].hdr.Mode&0o1000 == 0 {
		t.Errorf("/tmp is not sticky: its users can remove each other's files")
	}
}

func envValue(cf *v1.ConfigFile, key string) string {
	for _, kv := range cf.Config.Env {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}

// checkImageAgrees holds the image `make image` builds to the Dockerfile's
// final stage, played into df: the same user, entry point and working
// directory, the same files (those of the distroless base aside), and a
// binary built from the same module with the same flags.
func checkImageAgrees(t *testing.T, df *stage) {
	b := builtImage(t, 0)
	img := platformImage(t, b.index(t), runtime.GOARCH)
	if img == nil {
		t.Skipf("the image has no linux/%s, the platform the Dockerfile was played for", runtime.GOARCH)
	}
	cf := configFile(t, img)
	if cf.Config.User != df.user {
		t.Errorf("user %q, the Dockerfile's %q", cf.Config.User, df.user)
	}
	if !slices.Equal(cf.Config.Entrypoint, df.entry) {
		t.Errorf("entry point %q, the Dockerfile's %q", cf.Config.Entrypoint, df.entry)
	}
	if cf.Config.WorkingDir != df.workdir {
		t.Errorf("working directory %q, the Dockerfile's %q", cf.Config.WorkingDir, df.workdir)
	}

	files := imageFiles(t, img)
	played := map[string]bool{}
	err := filepath.WalkDir(df.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(df.root, p)
		if err != nil {
			return err
		}
		at := "/" + filepath.ToSlash(rel)
		played[at] = true
		f, ok := files[at]
		switch {
		case !ok:
			t.Errorf("%s: the Dockerfile's image has it, make image's does not%s", at, untrackedHint(t, df, at))
		case at == jobs.HelperBinary:
			compareBinaries(t, p, f.data)
		default:
			want, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if !bytes.Equal(f.data, want) {
				t.Errorf("%s: the content differs from the Dockerfile's image", at)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for p, f := range files {
		if f.hdr.Typeflag == tar.TypeReg && !played[p] && !slices.Contains(baseFiles, p) {
			t.Errorf("%s: make image's image has it, the Dockerfile's does not", p)
		}
	}
}

// untrackedHint explains the usual cause of a file the Dockerfile copies
// and make image does not: make image takes what git tracks, COPY whatever
// is in the checkout.
func untrackedHint(t *testing.T, df *stage, at string) string {
	rel, ok := strings.CutPrefix(at, df.workdir+"/")
	if !ok {
		return ""
	}
	cmd := exec.Command("git", "ls-files", "--error-unmatch", rel)
	cmd.Dir = repoRoot(t)
	if cmd.Run() == nil {
		return ""
	}
	return fmt.Sprintf(" (git does not track %s: commit or remove it)", rel)
}

// compareBinaries holds the image's binary to the one the Dockerfile's
// build stage made, through what Go records of a build: the toolchain, the
// modules, and the flags the two build files set (the rest, such as
// GOAMD64, comes from the environment the test runs in). Go leaves -ldflags
// out of that record under -trimpath: their effects are compared instead,
// -s -w by the sections they strip (-X by checkBinary's version check).
func compareBinaries(t *testing.T, playedBin string, imageBin []byte) {
	t.Helper()
	want, err := buildinfo.ReadFile(playedBin)
	if err != nil {
		t.Fatal(err)
	}
	got, err := buildinfo.Read(bytes.NewReader(imageBin))
	if err != nil {
		t.Fatal(err)
	}
	if got.GoVersion != want.GoVersion || got.Path != want.Path {
		t.Errorf("binary: %s %s, the Dockerfile's %s %s", got.GoVersion, got.Path, want.GoVersion, want.Path)
	}
	mods := func(bi *buildinfo.BuildInfo) []string {
		var out []string
		for _, d := range bi.Deps {
			out = append(out, d.Path+"@"+d.Version+"="+d.Sum)
		}
		return out
	}
	if !slices.Equal(mods(got), mods(want)) {
		t.Errorf("binary: its modules differ from the Dockerfile's")
	}
	settings := func(bi *buildinfo.BuildInfo) map[string]string {
		out := map[string]string{}
		for _, s := range bi.Settings {
			out[s.Key] = s.Value
		}
		return out
	}
	gs, ws := settings(got), settings(want)
	for _, k := range []string{"-buildmode", "-compiler", "-tags", "-trimpath", "-gcflags", "CGO_ENABLED", "GOOS", "GOARCH"} {
		if gs[k] != ws[k] {
			t.Errorf("binary: %s is %q, the Dockerfile's %q", k, gs[k], ws[k])
		}
	}
	played, err := os.ReadFile(playedBin)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(played, imageBin) {
		t.Logf("%s is byte for byte the Dockerfile's", jobs.HelperBinary)
		return
	}
	if gotS, wantS := sections(t, imageBin), sections(t, played); !slices.Equal(gotS, wantS) {
		t.Errorf("binary: sections %v, the Dockerfile's %v (-s -w strip the symbol and DWARF ones)", gotS, wantS)
	}
}

func sections(t *testing.T, bin []byte) []string {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range f.Sections {
		names = append(names, s.Name)
	}
	return names
}

func TestImagePush(t *testing.T) {
	b := builtImage(t, 0)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	repoRef := strings.TrimPrefix(srv.URL, "http://") + "/kubefledged/kubefledged"

	// Plain HTTP on 127.0.0.1, without -insecure: the program allows it
	// for loopback registries by itself.
	cmd := exec.Command(shared.tool, "push", "-layout", b.layout, repoRef+":pushed")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/image push: %v\n%s", err, stderr.Bytes())
	}
	if got, want := strings.TrimSpace(string(out)), repoRef+"@"+b.digest; got != want {
		t.Errorf("push printed %q, want %q", got, want)
	}

	ref, err := name.ParseReference(repoRef+":pushed", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Index(ref)
	if err != nil {
		t.Fatal(err)
	}
	digest, err := pulled.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if digest.String() != b.digest {
		t.Errorf("pulled %s, pushed %s", digest, b.digest)
	}
	// Every manifest, config and layer, fetched and checked against its
	// digest.
	if err := validate.Index(pulled); err != nil {
		t.Errorf("the pulled image is incomplete or corrupt: %v", err)
	}
}

// TestDigestLock holds the record `make bundle` made of the image (and
// `make verify` takes the digest from, without building, while the key of
// the inputs matches) to a build of this tree: each platform built here
// must have the manifest recorded, byte for byte, and a build of every
// platform the recorded digest. A key that missed an input the image
// depends on would let the bundle pin an image nobody builds; it fails here.
func TestDigestLock(t *testing.T) {
	root, tool := repoRoot(t), imageTool(t)
	mk, err := os.ReadFile(filepath.Join(root, "hack", "image.mk"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^IMAGE_GO \?= (\S+)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("no IMAGE_GO ?= in hack/image.mk")
	}
	if goVersion := runtime.Version(); goVersion != string(m[1]) {
		t.Skipf("the lock is for the image IMAGE_GO (%s) compiles; this is %s", m[1], goVersion)
	}
	cmd := exec.Command(tool, "digest", "-version", "v"+makeVersion(t), "-lock", filepath.FromSlash(lock.File),
		"-out", filepath.Join(t.TempDir(), "oci"), "-check")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/image digest -check: %v\n%s", err, stderr.Bytes())
	}
	recorded, err := lock.Read(filepath.Join(root, filepath.FromSlash(lock.File)))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != recorded.Digest {
		t.Fatalf("hack/image digest printed %s, the lock records %s", got, recorded.Digest)
	}
	im, err := v1.ParseIndexManifest(bytes.NewReader(recorded.Index))
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range im.Manifests {
		platforms = append(platforms, d.Platform.String())
	}
	slices.Sort(platforms)
	if want := wantPlatforms(); !slices.Equal(platforms, want) {
		t.Errorf("the lock records an index for %v, want every platform %v", platforms, want)
	}
	b := builtImage(t, 0)
	if err := recorded.Matches(b.index(t)); err != nil {
		t.Fatalf("%s records another image than this tree builds: %v; the lock's key (hack/image/lock.go) misses an input the image depends on", lock.File, err)
	}
	if slices.Equal(testPlatforms(t), wantPlatforms()) && b.digest != recorded.Digest {
		t.Fatalf("this tree builds %s for every platform, the lock records %s", b.digest, recorded.Digest)
	}
}
