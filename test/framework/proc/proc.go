// Package proc starts the child processes of a test (control plane, controller, operator)
// so that they die with the test binary, even when it is killed.
package proc

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

type startRequest struct {
	cmd *exec.Cmd
	res chan error
}

var (
	starterOnce sync.Once
	starterCh   = make(chan startRequest)
)

// Start starts cmd in a process group of its own (so that a stop can signal anything it
// forks) with Pdeathsig SIGKILL, from one goroutine locked to its OS thread for the life of
// the test binary. Pdeathsig fires when the *thread* that forked the child exits, not the
// process: starting from an ordinary goroutine would let the Go runtime retire that thread
// and kill a healthy child, while this thread only dies with the test binary itself, which
// is exactly when the children must die too.
func Start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	starterOnce.Do(func() {
		go func() {
			runtime.LockOSThread() // never unlocked: the goroutine and its thread live forever
			for req := range starterCh {
				req.res <- req.cmd.Start()
			}
		}()
	})
	req := startRequest{cmd: cmd, res: make(chan error, 1)}
	starterCh <- req
	return <-req.res
}
