// Package chaos injects faults into real kube-fledged processes running on the
// sandbox control plane: SIGKILLs at chosen moments, apiserver and etcd
// restarts, lost leaders, deleted Jobs, pods and nodes. The tests in this
// directory check that every ImageCache still ends in the right state;
// this file holds what they share with the operator's fault tests: building
// the binary and running it as a child process whose output is timestamped
// line by line.
package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubefledged/kube-fledged/test/framework/proc"
)

// LongEnv turns on the long variants of the fault tests (make test-chaos).
const LongEnv = "KUBEFLEDGED_CHAOS_LONG"

// Long reports whether the long variants were asked for.
func Long() bool { return os.Getenv(LongEnv) != "" }

// SeedEnv replays the random kill points of an earlier run.
const SeedEnv = "KUBEFLEDGED_CHAOS_SEED"

// Rand returns the random source of a fault test, seeded from SeedEnv when
// set, else from the clock, and logs the seed so that a failure can be
// replayed.
func Rand(t testing.TB) *rand.Rand {
	t.Helper()
	seed := time.Now().UnixNano()
	if s := os.Getenv(SeedEnv); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", SeedEnv, s, err)
		}
		seed = v
	}
	t.Logf("seed %d (set %s to replay the same kill points)", seed, SeedEnv)
	return rand.New(rand.NewSource(seed))
}

// Line is one line of a child's output, stamped when it arrived. Logs carry
// only whole seconds; ordering a takeover against Job creations needs better.
type Line struct {
	At   time.Time
	Text string
	// Fields are the line's JSON fields (zap's production format), or nil.
	Fields map[string]interface{}
}

// Msg is the log message of a JSON line.
func (l Line) Msg() string { s, _ := l.Fields["msg"].(string); return s }

// Str is a string field of a JSON line.
func (l Line) Str(key string) string { s, _ := l.Fields[key].(string); return s }

// Process is a child process under test.
type Process struct {
	Name    string
	Started time.Time
	child   *proc.Child

	mu     sync.Mutex
	lines  []Line
	wake   chan struct{} // closed and replaced whenever a line arrives
	killed time.Time
}

// Start runs bin with args in dir. Its output goes to logPath, each line
// prefixed with its arrival time, and is kept for WaitLine and Lines. The
// child dies with the test binary (Pdeathsig), so a failed test leaves no
// controller behind to disturb the next.
func Start(name, bin string, args []string, dir, logPath string) (*Process, error) {
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	logFile, err := proc.AppendLog(logPath, cmd)
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		_ = logFile.Close()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = w, w
	p := &Process{Name: name, wake: make(chan struct{})}
	read := make(chan struct{})
	p.child, err = proc.Run(cmd, func() {
		<-read
		_ = r.Close()
		_ = logFile.Close()
	})
	_ = w.Close()
	if err != nil {
		_ = logFile.Close()
		_ = r.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p.Started = time.Now()
	go func() {
		defer close(read)
		p.read(r, logFile)
	}()
	return p, nil
}

func (p *Process) read(r io.Reader, log io.Writer) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		l := Line{At: time.Now(), Text: sc.Text()}
		if strings.HasPrefix(l.Text, "{") {
			var f map[string]interface{}
			if json.Unmarshal([]byte(l.Text), &f) == nil {
				l.Fields = f
			}
		}
		fmt.Fprintf(log, "%s %s\n", l.At.Format("15:04:05.000"), l.Text)
		p.mu.Lock()
		p.lines = append(p.lines, l)
		close(p.wake)
		p.wake = make(chan struct{})
		p.mu.Unlock()
	}
}

// PID of the child.
func (p *Process) PID() int { return p.child.PID() }

// Exited reports whether the child has exited and its output is drained.
func (p *Process) Exited() bool { return p.child.Exited() }

// Done is closed when the child has exited and its output is drained.
func (p *Process) Done() <-chan struct{} { return p.child.Done() }

// Err is the child's exit, once Done is closed.
func (p *Process) Err() error { return p.child.Err() }

// Kill sends SIGKILL, as the OOM killer or a node failure would, waits for
// the child to be reaped and returns when the signal was sent.
func (p *Process) Kill() time.Time {
	p.mu.Lock()
	if p.killed.IsZero() {
		p.killed = time.Now()
	}
	at := p.killed
	p.mu.Unlock()
	p.child.Kill()
	return at
}

// Stop asks the child to stop (SIGTERM) and kills it after grace.
func (p *Process) Stop(grace time.Duration) { p.child.Stop(grace) }

// Lines returns a copy of the output so far.
func (p *Process) Lines() []Line {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Line{}, p.lines...)
}

// Tail is the last n lines, for failure messages.
func (p *Process) Tail(n int) string {
	ls := p.Lines()
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	var b strings.Builder
	for _, l := range ls {
		b.WriteString(l.Text)
		b.WriteByte('\n')
	}
	return b.String()
}

// WaitLine returns the first line, old or new, for which match holds. It
// fails when ctx ends or the child exits without printing one.
func (p *Process) WaitLine(ctx context.Context, match func(Line) bool) (Line, error) {
	seen := 0
	for {
		p.mu.Lock()
		lines := p.lines[seen:]
		wake := p.wake
		p.mu.Unlock()
		for _, l := range lines {
			if match(l) {
				return l, nil
			}
		}
		seen += len(lines)
		select {
		case <-wake:
		case <-p.Done():
			// Drained: one last look at what arrived before the exit.
			for _, l := range p.Lines()[seen:] {
				if match(l) {
					return l, nil
				}
			}
			return Line{}, fmt.Errorf("%s exited (%v) before the awaited line; last lines:\n%s", p.Name, p.Err(), p.Tail(30))
		case <-ctx.Done():
			return Line{}, fmt.Errorf("%s: no awaited line: %w; last lines:\n%s", p.Name, ctx.Err(), p.Tail(30))
		}
	}
}

// MsgIs matches a JSON log line by its message.
func MsgIs(msg string) func(Line) bool {
	return func(l Line) bool { return l.Msg() == msg }
}

// Contains matches any line containing s.
func Contains(s string) func(Line) bool {
	return func(l Line) bool { return strings.Contains(l.Text, s) }
}

// ContainsFold matches any line containing s, ignoring case: client-go's
// own messages changed case between releases.
func ContainsFold(s string) func(Line) bool {
	s = strings.ToLower(s)
	return func(l Line) bool { return strings.Contains(strings.ToLower(l.Text), s) }
}
