package framework

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/kubefledged/kube-fledged/test/framework/repo"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// Kubectl runs the tools' kubectl (bin/) against the sandbox of a suite run by
// sandbox.Main, for what only kubectl shows, such as the printer columns of a
// CRD as `kubectl get` lays them out. It reports false, having logged why, when
// no kubectl was built (`make tools`), so that a test can skip that check; a
// failing command fails t.
func Kubectl(t testing.TB, args ...string) (string, bool) {
	t.Helper()
	dir, err := repo.BinDir("")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "kubectl")
	if _, err := os.Stat(bin); err != nil {
		t.Logf("no %s (make tools): kubectl's output not checked", bin)
		return "", false
	}
	out, err := exec.Command(bin, append([]string{"--kubeconfig", sandbox.Get().KubeconfigPath()}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
	return string(out), true
}
