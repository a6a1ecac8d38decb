package e2e

import (
	"fmt"
	"testing"
	"time"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
	"github.com/contextd/contextd/internal/pgtest"
)

// watchUntil reads a watch stream in the background and reports when a
// status satisfies ok.
func watchUntil(stream contextdv1.ContextService_WatchContextStatusClient, ok func(*contextdv1.ContextStatus) bool) <-chan error {
	done := make(chan error, 1)
	go func() {
		for {
			resp, err := stream.Recv()
			if err != nil {
				done <- err
				return
			}
			if ok(resp.GetStatus()) {
				done <- nil
				return
			}
		}
	}()
	return done
}

func await(t *testing.T, done <-chan error, within time.Duration, what string) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: stream ended: %v", what, err)
		}
	case <-time.After(within):
		t.Fatalf("%s: not seen within %v", what, within)
	}
	return time.Since(start)
}

// TestWatchAcrossReplicas: a subscriber on one server sees appends made
// through another server on the same PostgreSQL, including the final version
// after a burst of 1,000 appends; then PostgreSQL restarts under the watch
// and the subscriber still sees what comes after.
func TestWatchAcrossReplicas(t *testing.T) {
	bin := build(t, t.TempDir(), "contextd", "./cmd/server")
	url := "CONTEXTD_DATABASE_URL=" + pgtest.URL(t)
	a, b := startProc(t, bin, url), startProc(t, bin, url)
	ca, cb := contextdv1.NewContextServiceClient(a.conn), contextdv1.NewContextServiceClient(b.conn)
	ctx := t.Context()
	if _, err := cb.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: "live", Model: "gpt-4o"}); err != nil {
		t.Fatal(err)
	}
	stream, err := ca.WatchContextStatus(ctx, &contextdv1.WatchContextStatusRequest{SessionId: "live"})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-watchUntil(stream, func(*contextdv1.ContextStatus) bool { return true }); err != nil {
		t.Fatal(err)
	}
	appendOne := func(i int) int64 {
		resp, err := cb.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "live",
			Messages: []*contextdv1.Message{{Role: contextdv1.Role_ROLE_USER, Parts: []*contextdv1.Part{text(fmt.Sprintf("message %d", i))}}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetVersion()
	}

	v := appendOne(0)
	lat := await(t, watchUntil(stream, func(s *contextdv1.ContextStatus) bool { return s.GetVersion() == v }), 10*time.Second, "first append")
	t.Logf("one append seen on the other replica after %v", lat)

	var last int64
	for i := 1; i <= 1000; i++ {
		last = appendOne(i)
	}
	lat = await(t, watchUntil(stream, func(s *contextdv1.ContextStatus) bool { return s.GetVersion() == last }), 10*time.Second, "end of the burst")
	t.Logf("final version %d of a 1,000-append burst seen %v after the last append returned", last, lat)

	pgtest.Restart(t, 500*time.Millisecond)
	// The servers' pools and the listener reconnect; the first appends may
	// fail while they do.
	var after int64
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := cb.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "live",
			Messages: []*contextdv1.Message{{Role: contextdv1.Role_ROLE_USER, Parts: []*contextdv1.Part{text("after the restart")}}}})
		if err == nil {
			after = resp.GetVersion()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("appends never recovered after the restart: %v", err)
		}
	}
	// Either the stream carried on (listener reconnected and re-synced), or
	// it ended and a resubscribe from the last version catches up.
	done := watchUntil(stream, func(s *contextdv1.ContextStatus) bool { return s.GetVersion() >= after })
	select {
	case err := <-done:
		if err == nil {
			t.Logf("the stream survived the restart")
			return
		}
		t.Logf("the stream ended (%v); resubscribing from version %d", err, last)
	case <-time.After(15 * time.Second):
		t.Fatal("the subscriber never saw the append made after the restart")
	}
	again, err := ca.WatchContextStatus(ctx, &contextdv1.WatchContextStatusRequest{SessionId: "live", FromVersion: last})
	if err != nil {
		t.Fatal(err)
	}
	await(t, watchUntil(again, func(s *contextdv1.ContextStatus) bool { return s.GetVersion() >= after }), 15*time.Second, "after resubscribing")
}
