package sandbox

import (
	"os"
	"os/exec"
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
			cmd := exec.Command("make", "-n", target, "LOCALBIN="+bin)
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
