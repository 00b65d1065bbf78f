package main

import (
	"context"
	"testing"
	"time"
)

// The hog must really spin and must stop soon after it is told to: one left
// spinning behind a test run would slow everything after it.
func TestHogSpinsAndStops(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	spins := hog(ctx, 2)
	if spins == 0 {
		t.Fatal("no loop spun")
	}
	// Generous: a loop checks its context about every 0.1 ms of work, but a
	// loaded machine may not schedule it for a while.
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("hog stopped %s after its context ended", took-200*time.Millisecond)
	}
}
