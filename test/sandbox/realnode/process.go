package realnode

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is containerd or the kubelet.
type proc struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed once reaped
	waitErr error         // valid after done
}

type spawnRequest struct {
	cmd *exec.Cmd
	res chan error
}

var (
	spawnerOnce sync.Once
	spawnCh     = make(chan spawnRequest)
)

// spawn forks from one goroutine locked to its OS thread for good. Pdeathsig fires when the
// forking thread exits, not the process: from an ordinary goroutine the Go runtime could
// retire that thread and kill a healthy kubelet, while this thread dies only with the test
// binary, which is exactly when the node's daemons must die too.
func spawn(cmd *exec.Cmd) error {
	spawnerOnce.Do(func() {
		go func() {
			runtime.LockOSThread()
			for req := range spawnCh {
				req.res <- req.cmd.Start()
			}
		}()
	})
	req := spawnRequest{cmd: cmd, res: make(chan error, 1)}
	spawnCh <- req
	return <-req.res
}

// startProc runs bin with its output appended to logDir/<name>.log, in a process group of
// its own so that stop reaches anything it forks (containerd's shims set their own group and
// are handled by the host clean-up instead).
func startProc(logDir, name, bin string, args ...string) (*proc, error) {
	logPath := filepath.Join(logDir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f, "### %s %s %s\n", time.Now().Format(time.RFC3339Nano), bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := spawn(cmd); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop signals the group with SIGTERM, then SIGKILL after grace. A reaped child's pgid may
// have been recycled, so it is never signalled.
func (p *proc) stop(grace time.Duration) {
	if p == nil || p.exited() {
		return
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(grace):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-p.done
}

// tail is the end of the log: a daemon that died at start-up is only explained by it.
func (p *proc) tail(n int) string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", p.logPath, err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

func (p *proc) failure() error {
	return fmt.Errorf("%s exited (%v); last lines of %s:\n%s", p.name, p.waitErr, p.logPath, p.tail(30))
}
