// Package dockerfile_test keeps the Dockerfile right without a Docker engine:
// it plays the Dockerfile's COPY, WORKDIR, ARG and build RUN steps into
// directories, one per stage, so that the Go build sees only the files the
// image build would see, then checks what the last stage holds: the entry
// point, a static binary whose subcommands run, and watches.yaml and the
// chart where the operator looks for them by default. image_test.go holds
// `make image`, which builds the image without Docker, to the same file.
package dockerfile_test

import (
	"bufio"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/operator"
	"github.com/kubefledged/kube-fledged/internal/platform"
	"github.com/kubefledged/kube-fledged/test/framework/files"
)

var repoDir = filepath.Join("..", "..")

type instruction struct {
	line int
	cmd  string // upper case
	args string
}

// parse splits a Dockerfile into instructions: comments and blank lines
// dropped, continuation lines joined.
func parse(t *testing.T, file string) []instruction {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		out     []instruction
		pending strings.Builder
		start   int
	)
	s := bufio.NewScanner(f)
	for n := 1; s.Scan(); n++ {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if pending.Len() == 0 {
			start = n
		}
		if strings.HasSuffix(line, `\`) {
			pending.WriteString(strings.TrimSuffix(line, `\`) + " ")
			continue
		}
		pending.WriteString(line)
		full := pending.String()
		pending.Reset()
		cmd, args, _ := strings.Cut(full, " ")
		out = append(out, instruction{line: start, cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)})
	}
	if pending.Len() > 0 {
		t.Fatalf("%s ends inside a continuation line", file)
	}
	return out
}

type stage struct {
	name    string
	image   string
	root    string // the stage's filesystem
	workdir string // absolute, inside the stage
	args    map[string]string
	user    string
	entry   []string
	// platformFlag is FROM's --platform.
	platformFlag string
	runs         []string
}

func (s *stage) path(p string) string {
	if !path.IsAbs(p) {
		p = path.Join(s.workdir, p)
	}
	return filepath.Join(s.root, filepath.FromSlash(p))
}

// image is the outcome of playing the Dockerfile.
type image struct {
	stages []*stage
	last   *stage
	// copied lists every context path a COPY read.
	copied []string
}

// play runs the Dockerfile's steps. platformArgs stand for what buildx
// passes for the build machine's platform.
func play(t *testing.T, dockerfile string, platformArgs map[string]string) *image {
	t.Helper()
	img := &image{}
	byName := map[string]*stage{}
	global := map[string]string{}
	var cur *stage
	for _, in := range parse(t, dockerfile) {
		where := fmt.Sprintf("Dockerfile:%d %s", in.line, in.cmd)
		switch in.cmd {
		case "FROM":
			fields := strings.Fields(in.args)
			st := &stage{root: t.TempDir(), workdir: "/", args: map[string]string{}}
			for len(fields) > 0 && strings.HasPrefix(fields[0], "--") {
				if v, ok := strings.CutPrefix(fields[0], "--platform="); ok {
					st.platformFlag = v
				}
				fields = fields[1:]
			}
			if len(fields) == 0 {
				t.Fatalf("%s: no image", where)
			}
			st.image = fields[0]
			if len(fields) == 3 && strings.EqualFold(fields[1], "AS") {
				st.name = fields[2]
				byName[st.name] = st
			}
			img.stages = append(img.stages, st)
			cur = st
		case "ARG":
			for _, a := range strings.Fields(in.args) {
				name, def, _ := strings.Cut(a, "=")
				v := def
				if p, ok := platformArgs[name]; ok {
					v = p
				}
				if cur == nil {
					global[name] = v
				} else {
					if g, ok := global[name]; ok && def == "" {
						v = g
					}
					cur.args[name] = v
				}
			}
		case "WORKDIR":
			cur.workdir = path.Join(cur.workdir, in.args)
			if err := os.MkdirAll(cur.path("."), 0o755); err != nil {
				t.Fatal(err)
			}
		case "COPY":
			fields := strings.Fields(in.args)
			from := ""
			for len(fields) > 0 && strings.HasPrefix(fields[0], "--") {
				if v, ok := strings.CutPrefix(fields[0], "--from="); ok {
					from = v
				}
				fields = fields[1:]
			}
			if len(fields) < 2 {
				t.Fatalf("%s: want sources and a destination", where)
			}
			srcs, dest := fields[:len(fields)-1], fields[len(fields)-1]
			toDir := strings.HasSuffix(dest, "/") || len(srcs) > 1
			for _, src := range srcs {
				if strings.ContainsAny(src, "*?[") {
					t.Fatalf("%s: wildcards are not played by this test: %s", where, src)
				}
				var abs string
				if from == "" {
					abs = filepath.Join(repoDir, filepath.FromSlash(src))
					img.copied = append(img.copied, src)
				} else {
					st := byName[from]
					if st == nil {
						t.Fatalf("%s: no stage %q", where, from)
					}
					abs = filepath.Join(st.root, filepath.FromSlash(src))
				}
				info, err := os.Stat(abs)
				if err != nil {
					t.Errorf("%s: source %s does not exist (%v)", where, src, err)
					continue
				}
				target := cur.path(dest)
				if !info.IsDir() && toDir {
					target = filepath.Join(target, filepath.Base(abs))
				}
				if err := files.CopyTree(abs, target, nil); err != nil {
					t.Fatalf("%s: %v", where, err)
				}
			}
		case "RUN":
			cur.runs = append(cur.runs, in.args)
			switch {
			case strings.Contains(in.args, "go build"):
				run(t, where, cur, in.args)
			case strings.TrimSpace(in.args) == "go mod download":
				// The module cache of this machine stands in for it.
			default:
				t.Fatalf("%s: this test does not know how to play %q; teach it", where, in.args)
			}
		case "USER":
			cur.user = in.args
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(in.args), &cur.entry); err != nil {
				t.Errorf("%s: use the exec (JSON) form, so that signals reach the binary: %v", where, err)
			}
		case "LABEL", "ENV", "EXPOSE", "CMD":
			// Nothing to play.
		default:
			t.Fatalf("%s: instruction unknown to this test; teach it", where)
		}
	}
	if cur == nil {
		t.Fatal("no FROM")
	}
	img.last = cur
	return img
}

// absPath finds absolute paths in a shell command (not URLs or module paths).
var absPath = regexp.MustCompile(`(^|[\s="'])(/[A-Za-z0-9._/-]+)`)

// run plays a RUN step with sh in the stage's working directory, its ARGs in
// the environment as the image build has them, and absolute paths moved
// into the stage's directory.
func run(t *testing.T, where string, st *stage, command string) {
	t.Helper()
	command = absPath.ReplaceAllString(command, "${1}"+st.root+"${2}")
	cmd := exec.Command("sh", "-ec", command)
	cmd.Dir = st.path(".")
	cmd.Env = os.Environ()
	for k, v := range st.args {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %s: %v\n%s", where, command, err, out)
	}
}

func makeVersion(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoDir, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^VERSION \?= (\S+)$`).FindSubmatch(raw)
	if m == nil {
		t.Fatal("no VERSION ?= in the Makefile")
	}
	return string(m[1])
}

// The subcommands that manifests and Jobs start the image with.
var subcommands = []string{"operator", "controller", "copy-self", "cri-rmi", "pin", "unpin", "exit", "version"}

func TestDockerfile(t *testing.T) {
	requireGo(t)
	img := play(t, filepath.Join(repoDir, "Dockerfile"), map[string]string{
		"TARGETOS": runtime.GOOS, "TARGETARCH": runtime.GOARCH, "TARGETVARIANT": "",
	})
	last := img.last
	if len(img.stages) < 2 {
		t.Fatalf("want a build stage and a runtime stage, got %d stages", len(img.stages))
	}
	build := img.stages[0]

	t.Run("the build stage cross-compiles for every platform", func(t *testing.T) {
		if build.platformFlag != "$BUILDPLATFORM" {
			t.Errorf("the build stage runs on %q, want --platform=$BUILDPLATFORM (no emulation)", build.platformFlag)
		}
		joined := strings.Join(build.runs, "\n")
		for _, want := range []string{"GOOS=$TARGETOS", "GOARCH=$TARGETARCH", "GOARM=${TARGETVARIANT#v}", "CGO_ENABLED=0"} {
			if !strings.Contains(joined, want) {
				t.Errorf("the go build does not set %s", want)
			}
		}
		// The platforms it names for buildx are those make image builds
		// and the controller serves.
		raw, err := os.ReadFile(filepath.Join(repoDir, "Dockerfile"))
		if err != nil {
			t.Fatal(err)
		}
		if want := "docker buildx build --platform " + platform.List() + " ."; !strings.Contains(string(raw), want) {
			t.Errorf("the Dockerfile's multi-arch line is not %q (internal/platform)", want)
		}
		// go.mod's go directive needs at least that Go.
		mod, err := os.ReadFile(filepath.Join(repoDir, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
		if goVersion == nil {
			t.Fatal("no go directive in go.mod")
		}
		if want := "golang:" + string(goVersion[1]); !strings.HasPrefix(build.image, want) {
			t.Errorf("build image %s, want %s (go.mod's go directive)", build.image, want)
		}
	})

	t.Run("the runtime stage is minimal and not root", func(t *testing.T) {
		if !strings.HasPrefix(last.image, "gcr.io/distroless/static") {
			t.Errorf("runtime image %s, want gcr.io/distroless/static (the binary is static)", last.image)
		}
		// Numeric, or the kubelet cannot check runAsNonRoot against it: the
		// chart names no runAsUser (OpenShift's restricted-v2 would refuse
		// one outside the namespace's range) and relies on this.
		uid, _, _ := strings.Cut(last.user, ":")
		if n, err := strconv.ParseUint(uid, 10, 32); err != nil || n == 0 {
			t.Errorf("USER %q: run as a non-root numeric user, which runAsNonRoot can verify", last.user)
		}
	})

	t.Run("the entry point is the binary the Jobs call", func(t *testing.T) {
		if len(last.entry) != 1 || last.entry[0] != jobs.HelperBinary {
			t.Fatalf("ENTRYPOINT %q, want [%q]", last.entry, jobs.HelperBinary)
		}
		f, err := elf.Open(last.path(jobs.HelperBinary))
		if err != nil {
			t.Fatalf("the image has no %s: %v", jobs.HelperBinary, err)
		}
		defer f.Close()
		// copy-self puts the binary into the images being pulled, which may
		// have no C library.
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s is dynamically linked", jobs.HelperBinary)
			}
		}
	})

	t.Run("every subcommand answers --help", func(t *testing.T) {
		for _, sub := range subcommands {
			cmd := exec.Command(last.path(jobs.HelperBinary), sub, "--help")
			cmd.Dir = last.path(".")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("kubefledged %s --help: %v\n%s", sub, err, out)
			}
		}
		// The operator Deployment of the bundle starts one of them.
		raw, err := os.ReadFile(filepath.Join(repoDir, "bundle", "manifests", "kube-fledged.clusterserviceversion.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var csv struct {
			Spec struct {
				Install struct {
					Spec struct {
						Deployments []struct {
							Spec struct {
								Template struct {
									Spec struct {
										Containers []struct {
											Args []string `json:"args"`
										} `json:"containers"`
									} `json:"spec"`
								} `json:"template"`
							} `json:"spec"`
						} `json:"deployments"`
					} `json:"spec"`
				} `json:"install"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(raw, &csv); err != nil {
			t.Fatal(err)
		}
		for _, d := range csv.Spec.Install.Spec.Deployments {
			for _, c := range d.Spec.Template.Spec.Containers {
				if len(c.Args) == 0 || !contains(subcommands, c.Args[0]) {
					t.Errorf("the CSV's Deployment starts %q, not a subcommand checked here", c.Args)
				}
			}
		}
	})

	t.Run("the binary reports the release version", func(t *testing.T) {
		out, err := exec.Command(last.path(jobs.HelperBinary), "version").Output()
		if err != nil {
			t.Fatal(err)
		}
		want := "v" + makeVersion(t)
		if got := strings.TrimSpace(string(out)); got != want {
			t.Errorf("version %q, want %q (the Makefile's VERSION; check the -X flag and ARG VERSION)", got, want)
		}
	})

	t.Run("the operator finds watches.yaml and the chart by default", func(t *testing.T) {
		ws, err := operator.LoadWatches(filepath.Join(last.path("."), operator.DefaultWatchesFile))
		if err != nil {
			t.Fatalf("from the image's working directory %s: %v", last.workdir, err)
		}
		for _, w := range ws {
			if w.Chart == nil || w.Chart.Metadata == nil || w.Chart.Metadata.Name == "" {
				t.Errorf("watch %s: no chart loaded", w.GroupVersionKind)
			}
		}
	})

	t.Run("make image builds this image without Docker", func(t *testing.T) {
		checkImageAgrees(t, last)
	})

	t.Run("only what the image needs is copied", func(t *testing.T) {
		for _, src := range img.copied {
			clean := strings.TrimSuffix(src, "/")
			if clean == "bin" || clean == "." || strings.HasPrefix(clean, "test") || strings.HasPrefix(clean, ".git") {
				t.Errorf("COPY %s brings build-machine or test files into the image", src)
			}
		}
	})
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
