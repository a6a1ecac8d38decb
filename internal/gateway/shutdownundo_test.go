package gateway

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/engine"
)

// TestAnsweredCallOnShutdownIsNotUndone: an answer that went out whole
// while the gateway closes (Wait: no recording starts) is still the
// provider's answer, so the session the request made is never undone: the
// undo (which would reach the engine, nil here, and panic) is not run.
// Before, record returned before marking the exchange, and close undid a
// session whose whole answer went out (issue 29).
func TestAnsweredCallOnShutdownIsNotUndone(t *testing.T) {
	g := New(Config{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	g.Wait(ctx) // closing: no recording starts
	x := &exchange{g: g, r: httptest.NewRequest("POST", "/v1/chat/completions", nil), tenant: "t",
		res:  resolved{id: "s", made: true, version: 1},
		prep: engine.PrepareResult{Status: engine.Status{Version: 2}},
		hold: &hold{inflight: &sync.Map{}}}
	x.record(outcome{usages: []usage{{ok: true, uncached: 10, output: 5}}})
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("the answered call's session was undone (the undo reached the engine): %v", p)
		}
	}()
	x.undoFailedMake()
}
