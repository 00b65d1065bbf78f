package proc

import (
	"os/exec"
	"syscall"
	"testing"

	. "github.com/onsi/gomega"
)

// The child runs in its own process group, marked to die with its parent's thread.
func TestStart(t *testing.T) {
	g := NewWithT(t)
	cmd := exec.Command("sh", "-c", "exit 3")
	g.Expect(Start(cmd)).To(Succeed())
	g.Expect(cmd.SysProcAttr.Setpgid).To(BeTrue())
	g.Expect(cmd.SysProcAttr.Pdeathsig).To(Equal(syscall.SIGKILL))
	pgid, err := syscall.Getpgid(cmd.Process.Pid)
	if err == nil { // the child may already be gone
		g.Expect(pgid).To(Equal(cmd.Process.Pid))
	}
	var exit *exec.ExitError
	g.Expect(cmd.Wait()).To(BeAssignableToTypeOf(exit))
	g.Expect(cmd.ProcessState.ExitCode()).To(Equal(3))
}
