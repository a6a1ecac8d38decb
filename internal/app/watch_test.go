package app

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// recvUntil reads statuses until one satisfies ok, failing after 10 s.
func recvUntil(t *testing.T, stream contextdv1.ContextService_WatchContextStatusClient, ok func(*contextdv1.ContextStatus) bool) *contextdv1.ContextStatus {
	t.Helper()
	type result struct {
		st  *contextdv1.ContextStatus
		err error
	}
	done := make(chan result, 1)
	go func() {
		for {
			resp, err := stream.Recv()
			if err != nil {
				done <- result{err: err}
				return
			}
			if ok(resp.GetStatus()) {
				done <- result{st: resp.GetStatus()}
				return
			}
		}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("stream ended: %v", r.err)
		}
		return r.st
	case <-time.After(10 * time.Second):
		t.Fatal("no matching status within 10 s")
		return nil
	}
}

func TestWatchOverGRPC(t *testing.T) {
	client := contextdv1.NewContextServiceClient(startServer(t, map[string]string{}))
	ctx := t.Context()
	for _, id := range []string{"w1", "w2"} {
		if _, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: id, Model: "gpt-4o"}); err != nil {
			t.Fatal(err)
		}
	}
	one, err := client.WatchContextStatus(ctx, &contextdv1.WatchContextStatusRequest{SessionId: "w1", HeartbeatSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	snap := recvUntil(t, one, func(s *contextdv1.ContextStatus) bool { return true })
	if snap.GetEvent() != contextdv1.StatusEvent_STATUS_EVENT_SNAPSHOT || snap.GetVersion() != 1 || snap.GetUsage().GetModel() != "gpt-4o" {
		t.Fatalf("snapshot: %v", snap)
	}
	all, err := client.WatchContextStatus(ctx, &contextdv1.WatchContextStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if _, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "w1", Messages: []*contextdv1.Message{user("hello")}}); err != nil {
			t.Fatal(err)
		}
	}
	final := recvUntil(t, one, func(s *contextdv1.ContextStatus) bool { return s.GetVersion() == 6 })
	if final.GetEvent() != contextdv1.StatusEvent_STATUS_EVENT_APPENDED || final.GetUsage().GetMessageCount() != 5 {
		t.Errorf("final: %v", final)
	}
	recvUntil(t, one, func(s *contextdv1.ContextStatus) bool {
		return s.GetEvent() == contextdv1.StatusEvent_STATUS_EVENT_HEARTBEAT
	})
	// The tenant-wide watch saw both snapshots and w1's final version.
	seen := map[string]bool{}
	recvUntil(t, all, func(s *contextdv1.ContextStatus) bool {
		seen[s.GetSessionId()] = true
		return s.GetSessionId() == "w1" && s.GetVersion() == 6
	})
	if !seen["w2"] {
		t.Error("tenant-wide watch missed w2's snapshot")
	}

	// Resume from the last version seen: no snapshot (the first message is a
	// heartbeat), and the next change arrives.
	resumed, err := client.WatchContextStatus(ctx, &contextdv1.WatchContextStatusRequest{SessionId: "w1", FromVersion: 6, HeartbeatSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if st := recvUntil(t, resumed, func(*contextdv1.ContextStatus) bool { return true }); st.GetEvent() != contextdv1.StatusEvent_STATUS_EVENT_HEARTBEAT {
		t.Errorf("resuming at the current version sent %v first", st)
	}
	if _, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "w1", Messages: []*contextdv1.Message{user("again")}}); err != nil {
		t.Fatal(err)
	}
	st := recvUntil(t, resumed, func(s *contextdv1.ContextStatus) bool {
		return s.GetEvent() != contextdv1.StatusEvent_STATUS_EVENT_HEARTBEAT
	})
	if st.GetVersion() != 7 || st.GetEvent() != contextdv1.StatusEvent_STATUS_EVENT_APPENDED {
		t.Errorf("resumed watch got %v", st)
	}
	// Deletion is the last status of a one-session watch.
	if _, err := client.DeleteSession(ctx, &contextdv1.DeleteSessionRequest{SessionId: "w1"}); err != nil {
		t.Fatal(err)
	}
	recvUntil(t, one, func(s *contextdv1.ContextStatus) bool {
		return s.GetEvent() == contextdv1.StatusEvent_STATUS_EVENT_DELETED
	})
	if _, err := one.Recv(); err != io.EOF {
		t.Errorf("after deletion: %v", err)
	}
	// Watching a missing session is NotFound.
	missing, err := client.WatchContextStatus(ctx, &contextdv1.WatchContextStatusRequest{SessionId: "nope"})
	if err == nil {
		_, err = missing.Recv()
	}
	if status.Code(err) != codes.NotFound {
		t.Errorf("missing session: %v", err)
	}
}

// TestWatchEndsOnShutdown: open streams end with UNAVAILABLE and a hint to
// resubscribe, and the server stops without waiting for its timeout.
func TestWatchEndsOnShutdown(t *testing.T) {
	addr := freeAddr(t)
	cfg, err := ParseConfig([]string{"--listen-addr", addr, "--metrics-addr", "", "--data-dir", t.TempDir(),
		"--shutdown-timeout", "5m"}, mapEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, slog.New(slog.NewJSONHandler(io.Discard, nil))) }()
	client := contextdv1.NewContextServiceClient(dial(t, addr))
	var stream contextdv1.ContextService_WatchContextStatusClient
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := client.CreateSession(t.Context(), &contextdv1.CreateSessionRequest{Id: "s", Model: "gpt-4o"}); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	if stream, err = client.WatchContextStatus(t.Context(), &contextdv1.WatchContextStatusRequest{SessionId: "s"}); err != nil {
		t.Fatal(err)
	}
	recvUntil(t, stream, func(*contextdv1.ContextStatus) bool { return true })
	cancel()
	_, err = stream.Recv()
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "from_version") {
		t.Fatalf("stream ended with %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("graceful stop waited for the watch stream")
	}
}
