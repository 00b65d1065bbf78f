package proc

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Child is a child process started by Run and reaped in the background, so that a test can
// ask at any time whether it still runs and stop it as a whole.
type Child struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // valid once done is closed
}

// Run starts cmd as Start does and reaps it in the background. after, when not nil, runs once
// the child has exited and before Done is closed: it closes the child's output, once drained,
// so that Done means everything the child wrote has been read.
func Run(cmd *exec.Cmd, after func()) (*Child, error) {
	if err := Start(cmd); err != nil {
		return nil, err
	}
	c := &Child{cmd: cmd, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		if after != nil {
			after()
		}
		close(c.done)
	}()
	return c, nil
}

// AppendLog opens path for appending and writes a line that names cmd and the time: a log a
// restarted child writes to again tells its runs apart.
func AppendLog(path string, cmd *exec.Cmd) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f, "### %s %s %s\n", time.Now().Format(time.RFC3339Nano), cmd.Path, strings.Join(cmd.Args[1:], " "))
	return f, nil
}

// PID of the child, which is also its process group's.
func (c *Child) PID() int { return c.cmd.Process.Pid }

// Args are the command line the child was started with, its binary first.
func (c *Child) Args() []string { return c.cmd.Args }

// Done is closed once the child has exited (and after has run).
func (c *Child) Done() <-chan struct{} { return c.done }

// Err is how the child exited, once Done is closed.
func (c *Child) Err() error { return c.err }

// Exited reports whether Done is closed.
func (c *Child) Exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM to the child's process group, then SIGKILL after grace, and returns
// once the child is reaped. Only the group of a child not yet reaped is signalled, so a
// recycled process group id is never hit.
func (c *Child) Stop(grace time.Duration) {
	if c.Exited() {
		return
	}
	_ = syscall.Kill(-c.PID(), syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(grace):
		c.Kill()
	}
}

// Kill sends SIGKILL to the child's process group, as the OOM killer or the death of the
// test binary would, and returns once the child is reaped.
func (c *Child) Kill() {
	if !c.Exited() {
		_ = syscall.Kill(-c.PID(), syscall.SIGKILL)
	}
	<-c.done
}
