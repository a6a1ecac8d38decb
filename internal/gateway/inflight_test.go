package gateway

import (
	"context"
	"testing"
	"time"
)

// TestBusyFreesAbandonedCalls: a session whose call is upstream is busy
// until the call ends — unless the call's client went away, which a
// client that gave up on a hanging provider and retries did: its retry
// lands in the session. A call whose answer is being recorded keeps the
// session busy (waited for), its client gone or not. Before, the session
// stayed busy while the abandoned call unwound, and under load the
// client's retry went on in a copy of the session (a "rewound" fork), so
// the first session never got the reply (TestUpstreamFailuresKeepOneTurn's
// flake).
func TestBusyFreesAbandonedCalls(t *testing.T) {
	g := &Gateway{}
	ctx := context.Background()
	soon := func() time.Time { return time.Now().Add(50 * time.Millisecond) }
	client, leave := context.WithCancel(ctx)
	h := g.hold(client, "t", "s")
	defer h.release()
	if !g.busy(ctx, "t", "s", soon()) {
		t.Fatal("a call upstream does not keep its session busy")
	}
	leave()
	if g.busy(ctx, "t", "s", soon()) {
		t.Fatal("a call whose client went away keeps its session busy")
	}
	// Its answer went out whole and is being recorded: busy until the
	// recording ends (here it does not, within until).
	h.mark(recordingKey("t", "s"))
	h.recording = true
	if !g.busy(ctx, "t", "s", soon()) {
		t.Fatal("a session whose answer is being recorded is not busy")
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		h.release()
	}()
	if g.busy(ctx, "t", "s", time.Now().Add(10*time.Second)) {
		t.Fatal("a session whose recording ended is busy")
	}
	if g.busy(ctx, "t", "other", soon()) {
		t.Fatal("a session with no call is busy")
	}
}
