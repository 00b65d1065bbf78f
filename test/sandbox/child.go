package sandbox

import (
	"time"
)

// Child is a daemon a test runs beside the sandbox (the real node's
// containerd and kubelet), supervised as the control plane's own binaries
// are: its own process group, its output appended to a log, and killed with
// the test binary if that dies first.
type Child struct{ p *process }

// StartChild runs bin with args, its output appended to logDir/<name>.log.
func StartChild(logDir, name, bin string, args ...string) (*Child, error) {
	return StartChildEnv(logDir, name, bin, nil, args...)
}

// StartChildEnv is StartChild with env ("KEY=value") added to the test's
// environment: OLM's operators, say, find their kubeconfig and their gRPC
// proxy there.
func StartChildEnv(logDir, name, bin string, env []string, args ...string) (*Child, error) {
	p, err := startProcess(logDir, name, bin, args, env)
	if err != nil {
		return nil, err
	}
	return &Child{p: p}, nil
}

// Exited says whether the child has exited; a nil Child has not started.
func (c *Child) Exited() bool { return c != nil && c.p.exited() }

// Stop sends SIGTERM to the child's group, then SIGKILL after grace. A nil
// Child is a no-op, so that a partly started set stops as a whole.
func (c *Child) Stop(grace time.Duration) {
	if c != nil {
		c.p.stop(grace)
	}
}

// LogPath is the child's log file.
func (c *Child) LogPath() string { return c.p.logPath }

// Tail is the last n lines of the child's log.
func (c *Child) Tail(n int) string { return c.p.logTail(n) }

// Failure describes a child that exited, with the end of its log.
func (c *Child) Failure() error { return c.p.failure() }

// Kill SIGKILLs the child's group at once and waits for it, as the death of
// the test binary would (Pdeathsig): tests of crash recovery use it.
func (c *Child) Kill() {
	if c != nil {
		c.p.Kill()
	}
}
