package upgrade_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// repo is the repository root, where the documented commands run (they
// name helm-charts/... and config/... relative to it).
var repo = filepath.Join("..", "..", "..")

var doc framework.Once[string]

// section returns the text of docs/install.md's "From the original
// kube-fledged", which every command a test runs must appear in, word for
// word: a step changed in the document and not here (or the reverse) fails.
func section(t *testing.T) string {
	t.Helper()
	return doc.Get(t, func() (string, error) {
		raw, err := os.ReadFile(filepath.Join(repo, "docs", "install.md"))
		if err != nil {
			return "", err
		}
		s := string(raw)
		start := strings.Index(s, "## From the original kube-fledged")
		if start < 0 {
			return "", errors.New(`docs/install.md has no section "From the original kube-fledged"`)
		}
		s = s[start:]
		if end := strings.Index(s[3:], "\n## "); end >= 0 {
			s = s[:end+3]
		}
		return s, nil
	})
}

// procedure is one run of the documented steps: the three names the
// section asks the user to set, for one original install.
type procedure struct {
	ns, release, fullname string
}

// documented fails the test unless cmd is in the section as written.
func (p procedure) documented(t *testing.T, cmd string) {
	t.Helper()
	if !strings.Contains(section(t), cmd) {
		t.Fatalf("docs/install.md does not say, word for word:\n%s", cmd)
	}
}

// shell runs a documented command as a user would paste it: through bash,
// with NS, RELEASE and FULLNAME set, bin/kubectl first on the PATH, the
// sandbox's kubeconfig, from the repository root. It returns what the
// command printed (stdout and stderr) and its error.
func (p procedure) shell(t *testing.T, cmd string) (string, error) {
	t.Helper()
	p.documented(t, cmd)
	bin, err := filepath.Abs(filepath.Join(repo, "bin"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(bin, "kubectl")); err != nil {
		// Built with the control plane's binaries (make tools), which
		// the sandbox needs anyway.
		t.Fatalf("the documented steps need bin/kubectl: %v", err)
	}
	c := exec.Command("bash", "-o", "pipefail", "-c", cmd)
	c.Dir = repo
	c.Env = append(os.Environ(),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+sandbox.Get().KubeconfigPath(),
		"NS="+p.ns, "RELEASE="+p.release, "FULLNAME="+p.fullname)
	out, err := c.CombinedOutput()
	t.Logf("$ %s\n%s", cmd, out)
	return string(out), err
}

// mustShell is shell for a step that must succeed.
func (p procedure) mustShell(t *testing.T, cmd string) string {
	t.Helper()
	out, err := p.shell(t, cmd)
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	return out
}
