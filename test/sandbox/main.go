package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"
)

var shared *Sandbox

// Main is for TestMain: it starts one sandbox for the whole package, runs the tests, stops
// the sandbox and exits with the tests' code. A sandbox that cannot start fails the package
// loudly (exit 1, with the reason); skipping would let a broken environment look green.
func Main(m *testing.M, o Options) {
	begin := time.Now()
	s, err := Start(context.Background(), o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandbox: start failed after %s: %v\n", time.Since(begin).Round(time.Millisecond), err)
		os.Exit(1)
	}
	shared = s
	// An interrupted `go test` would otherwise leave the temp dir behind (the processes die
	// with the binary anyway, through Pdeathsig).
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		_ = s.Stop()
		os.Exit(1)
	}()
	code := m.Run()
	signal.Stop(sigs)
	if err := s.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "sandbox: stop: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// Get returns the sandbox started by Main, or nil outside a Main-run package.
func Get() *Sandbox { return shared }
