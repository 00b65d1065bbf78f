package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/kubefledged/kube-fledged/test/framework/repo"
)

// The Makefile's targets that run this sandbox on another Kubernetes version
// (E2E_KUBE_VERSION) must build that version's control plane before they run
// it. Stop 37's `make test` did not: its prerequisite named a variable defined
// further down the Makefile, which make had expanded to nothing, and a machine
// whose bin/ lacked the files failed at resolveBins. `make -n` into an empty
// bin dir prints what a fresh machine would run, in order.
func TestMakeBuildsEveryControlPlaneItRuns(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	runsVersion := regexp.MustCompile(`\bE2E_KUBE_VERSION=(v[0-9][^ ]*)`)
	for _, target := range []string{"test", "test-oldest"} {
		t.Run(target, func(t *testing.T) {
			g := NewWithT(t)
			bin := t.TempDir()
			// A dry run still runs the lines that call make, verify's copy of the tree among
			// them: into a folder of the test's, not the one a `make test` beside it verifies in.
			cmd := exec.Command("make", "-n", target, "LOCALBIN="+bin, "VERIFY_DIR="+t.TempDir())
			cmd.Dir = root
			// Under `make test` the parent's flags (its jobserver among them) are in the
			// environment; this make must read the Makefile afresh.
			cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
				return strings.HasPrefix(kv, "MAKEFLAGS=") || strings.HasPrefix(kv, "MFLAGS=") || strings.HasPrefix(kv, "MAKELEVEL=")
			})
			out, err := cmd.CombinedOutput()
			g.Expect(err).NotTo(HaveOccurred(), "make -n %s:\n%s", target, out)
			lines := strings.Split(string(out), "\n")
			ran := 0
			for i, line := range lines {
				m := runsVersion.FindStringSubmatch(line)
				if m == nil || !strings.Contains(line, "go test") {
					continue
				}
				ran++
				for _, c := range kubeVersioned {
					g.Expect(builds(lines[:i], bin, c, m[1])).To(BeTrue(),
						"make %s runs the sandbox on %s (line %d) without building %s/%s-%s before it:\n%s", target, m[1], i+1, bin, c, m[1], out)
				}
			}
			g.Expect(ran).To(BeNumerically(">", 0), "make %s runs no go test with E2E_KUBE_VERSION:\n%s", target, out)
		})
	}
}

// builds reports whether one of lines puts bin/CMD-VERSION in place: the kube-tools
// recipe moves each of its commands there from its build directory in a shell loop.
func builds(lines []string, bin, cmd, version string) bool {
	for _, l := range lines {
		if strings.Contains(l, bin+"/"+cmd+"-"+version) {
			return true
		}
		if strings.Contains(l, "for c in ") && strings.Contains(l, " "+cmd) && strings.Contains(l, bin+"/$c-"+version) {
			return true
		}
	}
	return false
}

// `make test` runs the tests OLDEST_TESTS names on the oldest Kubernetes claimed, by a
// -run pattern; a name that is no test of the suite (renamed, mistyped) would match
// nothing, and go test passes on a pattern that matches nothing.
func TestOldestTestsAreTests(t *testing.T) {
	g := NewWithT(t)
	root, err := repo.Root()
	g.Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command("make", "-s", "--no-print-directory", "print-OLDEST_TESTS")
	cmd.Dir = root
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "MAKEFLAGS=") || strings.HasPrefix(kv, "MFLAGS=") || strings.HasPrefix(kv, "MAKELEVEL=")
	})
	out, err := cmd.Output()
	g.Expect(err).NotTo(HaveOccurred())
	names := strings.Fields(string(out))
	g.Expect(names).NotTo(BeEmpty(), "make names no OLDEST_TESTS")
	files, err := filepath.Glob(filepath.Join(root, "test", "e2e", "imagecache", "*_test.go"))
	g.Expect(err).NotTo(HaveOccurred())
	defined := map[string]bool{}
	testFunc := regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\)`)
	for _, f := range files {
		src, err := os.ReadFile(f)
		g.Expect(err).NotTo(HaveOccurred())
		for _, m := range testFunc.FindAllStringSubmatch(string(src), -1) {
			defined[m[1]] = true
		}
	}
	for _, n := range names {
		g.Expect(defined).To(HaveKey(n), "OLDEST_TESTS names %s, which is no test of test/e2e/imagecache", n)
	}
}
