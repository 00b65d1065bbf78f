package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kubefledged/kube-fledged/test/framework/proc"
)

// process is one child binary of the sandbox.
type process struct {
	*proc.Child
	name    string
	logPath string
	// stopping is set when the sandbox itself stops the process, so that its exit is not
	// reported as a crash.
	stopping atomic.Bool
}

// startProcess runs bin with args, output appended to logs/<name>.log. The child gets its own
// process group so Stop can signal anything it forks, and Pdeathsig so that a crashed or
// killed test binary never leaves a control plane behind.
func startProcess(logDir, name, bin string, args []string, env []string) (*process, error) {
	cmd := exec.Command(bin, args...)
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := proc.AppendLog(logPath, cmd)
	if err != nil {
		return nil, err
	}
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = append(os.Environ(), env...)
	c, err := proc.Run(cmd, func() { _ = logFile.Close() })
	if err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return &process{Child: c, name: name, logPath: logPath}, nil
}

func (p *process) exited() bool { return p.Exited() }

// stop stops the process as the sandbox's own doing (see stopping).
func (p *process) stop(grace time.Duration) {
	p.stopping.Store(true)
	p.Stop(grace)
}

// logTail returns the last n lines of the process's log, for error messages: a start-up
// failure is useless without the reason the binary printed.
func (p *process) logTail(n int) string {
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

// failure describes a process that exited when it should be running.
func (p *process) failure() error {
	return fmt.Errorf("%s exited early (%v); last lines of %s:\n%s", p.name, p.Err(), p.logPath, p.logTail(40))
}

// addrInUse tells whether an early exit was a lost race for a port, which is worth a retry
// with fresh ports rather than a failure.
func (p *process) addrInUse() bool {
	return strings.Contains(p.logTail(60), "address already in use")
}

// FreePorts reserves n distinct loopback ports by binding them all at once, then releases
// them for the child to bind. Another process can still take one in between; callers retry
// on "address already in use".
//
// The ports are drawn at random below the kernel's ephemeral range and Kubernetes' NodePort
// range (freePortLow to freePortHigh), where no bind to port 0, no outgoing connection and
// no NodePort rule of the real node's kube-proxy lands: a port the kernel hands out was,
// under `make test`'s parallel suites, soon handed to the next process that asked, which
// then served on the port a webhook was about to bind.
func FreePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := listenBelowEphemeral()
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// The default ip_local_port_range starts at 32768, the NodePort range at 30000.
const freePortLow, freePortHigh = 20000, 29999

// listenBelowEphemeral binds a random free port of [freePortLow, freePortHigh], or, after
// many tries, one the kernel picks.
func listenBelowEphemeral() (net.Listener, error) {
	for range 200 {
		port := freePortLow + rand.IntN(freePortHigh-freePortLow+1)
		if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			return l, nil
		}
	}
	return net.Listen("tcp", "127.0.0.1:0")
}

// FreePort is one port of FreePorts: for the in-process servers a test starts (webhook,
// probes, metrics), which take a port number and cannot be handed a listener.
func FreePort() (int, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// errRetry marks a readiness failure caused by a port collision.
var errRetry = errors.New("port collision")

// poll calls cond every interval until it reports done, ctx ends, or one of watch exits.
func poll(ctx context.Context, interval time.Duration, watch []*process, cond func(context.Context) (bool, error)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		for _, p := range watch {
			if p.exited() {
				if p.addrInUse() {
					return fmt.Errorf("%w: %w", errRetry, p.failure())
				}
				return p.failure()
			}
		}
		ok, err := cond(ctx)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
