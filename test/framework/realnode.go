package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

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
