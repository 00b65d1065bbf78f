package proc

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

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

// childTimeout bounds a wait on a child process: gomega's default second is short for a
// shell to start and fork on a loaded machine. (framework.ClusterTimeout's value; this
// leaf package cannot import the framework.)
const childTimeout = 5 * time.Minute

// Stop ends the whole process group: the shell and what it forked.
func TestChildStop(t *testing.T) {
	g := NewWithT(t)
	log, err := AppendLog(t.TempDir()+"/child.log", exec.Command("sh", "-c", "sleep 60 & wait"))
	g.Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command("sh", "-c", "trap '' TERM; sleep 60 & echo $!; wait")
	cmd.Stdout = log
	closed := false
	c, err := Run(cmd, func() { closed = log.Close() == nil })
	g.Expect(err).NotTo(HaveOccurred())
	var lines []string
	g.Eventually(func() []string {
		raw, _ := os.ReadFile(log.Name())
		lines = strings.Split(strings.TrimSpace(string(raw)), "\n")
		return lines
	}).WithTimeout(childTimeout).Should(HaveLen(2), "the shell has set its trap and forked")
	g.Expect(c.Exited()).To(BeFalse())
	c.Stop(200 * time.Millisecond) // the shell ignores SIGTERM: SIGKILL ends it
	g.Expect(c.Exited()).To(BeTrue())
	g.Expect(closed).To(BeTrue(), "after ran before Done")
	g.Expect(c.Err()).To(MatchError(ContainSubstring("killed")))
	g.Expect(lines[0]).To(MatchRegexp(`^### \S+ /\S+/sh -c sleep 60 & wait$`))
	var sleeper int
	_, err = fmt.Sscan(lines[1], &sleeper)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() bool { return dead(sleeper) }).WithTimeout(childTimeout).Should(BeTrue(), "the forked sleep died with its group")
}

// dead says whether pid is gone or a zombie no one has reaped yet (its parent, the shell, was
// killed first).
func dead(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	_, after, _ := strings.Cut(string(stat), ") ")
	return strings.HasPrefix(after, "Z") || strings.HasPrefix(after, "X")
}
