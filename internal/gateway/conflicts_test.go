package gateway

import (
	"context"
	"testing"
	"time"
)

// TestConflictsRetryUntilDeadline: conflicting writes are tried again
// with a growing wait for as long as the request's deadline allows (far
// more than the three or four tries a fixed count gave), and no longer.
func TestConflictsRetryUntilDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	var c conflicts
	tries := 0
	start := time.Now()
	for c.again(ctx) {
		tries++
	}
	took := time.Since(start)
	if tries < 5 {
		t.Errorf("%d retries within 600 ms, want more than a fixed count of 4", tries)
	}
	if took > 700*time.Millisecond {
		t.Errorf("retried for %v, past the request's deadline", took)
	}
	// A context that ended stops the retries at once.
	done, stop := context.WithCancel(context.Background())
	stop()
	var d conflicts
	if d.again(done) {
		t.Errorf("retried after the request ended")
	}
}
