// Command cpuhog keeps CPUs busy, so that tests can be run the way CI runs them
// on a loaded machine: every wait on another process stretched, every race that
// a quiet machine hides given its chance. `hack/loaded-test.sh` runs `make test`
// beside it; docs/reliability.md says what it proved.
//
//	go run ./hack/cpuhog -procs 2 -for 30m
//
// It spins at the normal priority (a lower one would yield to the tests and
// prove nothing) and stops after -for, on SIGINT or SIGTERM, or when its parent
// goes away, so that a hog is never left behind a killed run.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"
)

func main() {
	procs := flag.Int("procs", runtime.NumCPU(), "busy loops to run, one per CPU to keep busy")
	dur := flag.Duration("for", time.Hour, "stop after this long (0: until signalled)")
	flag.Parse()
	if *procs < 1 {
		fmt.Fprintln(os.Stderr, "cpuhog: -procs must be at least 1")
		os.Exit(2)
	}
	if *dur < 0 {
		fmt.Fprintln(os.Stderr, "cpuhog: -for must not be negative")
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *dur > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *dur)
		defer cancel()
	}
	ctx = untilOrphaned(ctx)

	start := time.Now()
	spins := hog(ctx, *procs)
	fmt.Printf("cpuhog: %d loops for %s, %d spins\n", *procs, time.Since(start).Round(time.Second), spins)
}

// hog runs n busy loops until ctx ends and returns how many rounds they spun,
// a figure that shows the loops really ran.
func hog(ctx context.Context, n int) uint64 {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total uint64
	)
	for range n {
		wg.Go(func() {
			var spins uint64
			for ctx.Err() == nil {
				// A round of pure arithmetic between checks of ctx: long
				// enough that the check costs nothing, short enough to stop
				// within a millisecond.
				x := spins
				for range 1 << 16 {
					x = x*6364136223846793005 + 1442695040888963407
				}
				if x == 0 {
					spins++
				}
				spins++
			}
			mu.Lock()
			total += spins
			mu.Unlock()
		})
	}
	wg.Wait()
	return total
}

// untilOrphaned ends ctx when the process that started the hog exits: a test
// run killed by its own timeout must not leave both cores busy behind it.
func untilOrphaned(ctx context.Context) context.Context {
	ctx, cancel := context.WithCancel(ctx)
	parent := os.Getppid()
	go func() {
		defer cancel()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if os.Getppid() != parent {
					return
				}
			}
		}
	}()
	return ctx
}
