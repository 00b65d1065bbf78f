package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kubefledged/kube-fledged/test/sandbox"
	"github.com/kubefledged/kube-fledged/test/sandbox/realnode"
)

// RealNodeRequiredEnv, when set, makes a machine that cannot run a real node fail the suites
// that need one instead of skipping them: CI on a capable machine sets it, so that a lost
// package or a missing build step does not pass unseen.
const RealNodeRequiredEnv = "KUBEFLEDGED_REALNODE_REQUIRED"

// RealNodeSkip says why this machine cannot run a real node, for the suite to skip with;
// "" when it can. The error is set instead when RealNodeRequiredEnv asks for a real node.
func RealNodeSkip() (reason string, err error) {
	if err := realnode.Check(realnode.Options{}); err != nil {
		if os.Getenv(RealNodeRequiredEnv) != "" {
			return "", fmt.Errorf("%v (%s is set)", err, RealNodeRequiredEnv)
		}
		return err.Error(), nil
	}
	return "", nil
}

// RealNodeCluster is a sandbox with one kwok node and a real node beside it.
type RealNodeCluster struct {
	SB   *sandbox.Sandbox
	Node *realnode.Node

	sigs    chan os.Signal
	once    sync.Once
	stopErr error
}

// StartRealNodeCluster starts the sandbox, then the real node on it. Until Stop, an
// interrupt or SIGTERM stops both and exits: the node changes the host, and an interrupted
// run must still give it back.
func StartRealNodeCluster(ctx context.Context) (*RealNodeCluster, error) {
	sb, err := sandbox.Start(ctx, sandbox.Options{Nodes: 1})
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	c := &RealNodeCluster{SB: sb, sigs: make(chan os.Signal, 1)}
	signal.Notify(c.sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		if _, ok := <-c.sigs; ok {
			_ = c.Stop()
			os.Exit(1)
		}
	}()
	if c.Node, err = realnode.Start(ctx, sb, realnode.Options{}); err != nil {
		_ = c.Stop()
		return nil, fmt.Errorf("real node: %w", err)
	}
	return c, nil
}

// Stop stops the node and the control plane at once (one by one took several seconds
// more) and gives the host back. It is idempotent.
func (c *RealNodeCluster) Stop() error {
	c.once.Do(func() {
		signal.Stop(c.sigs)
		var wg sync.WaitGroup
		var nerr, serr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			if c.Node != nil {
				nerr = c.Node.Stop()
			}
		}()
		go func() { defer wg.Done(); serr = c.SB.Stop() }()
		wg.Wait()
		c.stopErr = errors.Join(nerr, serr)
	})
	return c.stopErr
}

// RealNodeSuite is the TestMain of a suite that runs on a sandbox with a real node.
type RealNodeSuite struct {
	// Name starts the suite's log lines, e.g. "e2e/realnode".
	Name string
	// Prepare runs while the cluster starts, in dir (a temporary directory of the run): the
	// builds, which cold are the longest step.
	Prepare func(ctx context.Context, dir string) error
	// Setup runs once the cluster and Prepare are both done: what the tests need on it.
	Setup func(ctx context.Context, c *RealNodeCluster, dir string) error
}

// realNodeSetupTimeout bounds the setup only: a cold static build on a fresh CI machine
// (every dependency compiled without cgo) took 9 minutes on two loaded cores; warm, setup
// is seconds.
const realNodeSetupTimeout = 25 * time.Minute

// skip is why this machine cannot run a real node, once TestMain has looked.
var skip string

// NeedRealNode skips a test on a machine that cannot run a real node, naming what is missing.
func NeedRealNode(t testing.TB) {
	t.Helper()
	if skip != "" {
		t.Skip(skip)
	}
}

// Run sets the cluster up, runs the tests and stops the cluster, and returns the exit code.
// On a machine that cannot run a real node it runs the tests without a cluster: each skips
// through NeedRealNode.
func (s RealNodeSuite) Run(m *testing.M) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, s.Name+": "+format+"\n", args...)
		return 1
	}
	var err error
	if skip, err = RealNodeSkip(); err != nil {
		return fail("%v", err)
	} else if skip != "" {
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), realNodeSetupTimeout)
	defer cancel()
	begin := time.Now()
	dir, err := os.MkdirTemp("", "kubefledged-"+strings.ReplaceAll(s.Name, "/", "-")+"-")
	if err != nil {
		return fail("%v", err)
	}
	defer os.RemoveAll(dir)
	prepared := make(chan error, 1)
	go func() { prepared <- s.Prepare(ctx, dir) }()
	c, err := StartRealNodeCluster(ctx)
	if err != nil {
		<-prepared
		return fail("%v", err)
	}
	defer func() { _ = c.Stop() }()
	fmt.Fprintf(os.Stderr, "%s: sandbox and node %s Ready in %s (the node alone %s)\n", s.Name, c.Node.Name(), time.Since(begin).Round(time.Millisecond), c.Node.ReadyIn().Round(time.Millisecond))
	if err := <-prepared; err != nil {
		return fail("%v", err)
	}
	if err := s.Setup(ctx, c, dir); err != nil {
		return fail("%v", err)
	}
	fmt.Fprintf(os.Stderr, "%s: set up in %s\n", s.Name, time.Since(begin).Round(time.Millisecond))
	code := m.Run()
	t0 := time.Now()
	if err := c.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: stop: %v\n", s.Name, err)
		code = 1
	}
	fmt.Fprintf(os.Stderr, "%s: node and sandbox stopped in %s\n", s.Name, time.Since(t0).Round(time.Millisecond))
	return code
}
