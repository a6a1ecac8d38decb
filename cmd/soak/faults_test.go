package main

import (
	"context"
	"testing"
	"time"
)

// TestFaultsEndWhenTheStallNeverStarted: a run too short for the stalled
// watcher's step (it comes after the faults' end) still ends; faults used
// to wait for a watcher that was never started, for ever.
func TestFaultsEndWhenTheStallNeverStarted(t *testing.T) {
	s := &soak{opt: options{duration: 10 * time.Second}, rep: newReport()}
	s.rep.start = time.Now()
	done := make(chan struct{})
	go func() { defer close(done); s.faults(context.Background(), -10*time.Second) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("faults did not return: it waits for a stalled watcher that never started")
	}
}
