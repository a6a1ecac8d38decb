package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/contextd/contextd/internal/pgtest"
)

// TestRetriedRequestKeepsNoEdits: a request's client edits and its append
// are one transaction (PrepareContext's, engine.PrepareInput.Edits): while
// the request is inside it, its edits are not visible, another write of
// the session (UpdateSession) waits for it, and when the append then
// fails the request changed nothing — no edit to revert. Before, the edits
// were committed first and reverted after the failure, best-effort (and
// with a version conflict in between, only the last attempt's were).
//
// The interleaving is made, not hoped for: the test holds the session's
// row, so the request, matched and its edits found, waits to lock it in
// its transaction; meanwhile an UpdateSession (labels) queues on the row
// too. Fails before: the request's edits were committed (and listed, if
// reverted) before its append failed.
func TestRetriedRequestKeepsNoEdits(t *testing.T) {
	url := pgtest.URL(t)
	s := start(t, map[string]string{"CONTEXTD_DATABASE_URL": url, "CONTEXTD_MAX_VIEW_BYTES": "40000"})
	id, before, second := s.overBoundTurn(editDoors["chat"])

	waiting, release := holdSession(t, url, id)

	served := make(chan int, 1)
	go func() {
		b, _ := json.Marshal(second)
		req, _ := http.NewRequest(http.MethodPost, s.url("/v1/chat/completions"), bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer sk-test")
		req.Header.Set("X-Contextd-Session", "edits")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			served <- 0
			return
		}
		resp.Body.Close()
		served <- resp.StatusCode
	}()
	// The request waits for the session: none of its edits is visible.
	awaitWaiting(t, waiting, 1, "the request")
	if n := s.compactionCount(id); n != 0 {
		t.Fatalf("%d compactions visible while the request's transaction is open, want none", n)
	}
	updated := s.rpcAsync("UpdateSession", map[string]any{"sessionId": id, "updateMask": "labels", "labels": map[string]string{"moved": "yes"}})
	awaitWaiting(t, waiting, 2, "the update") // queued on the session's row
	release()
	if code := <-updated; code != http.StatusOK {
		t.Fatalf("UpdateSession: %d", code)
	}
	if code := <-served; code == http.StatusOK || code == 0 {
		t.Fatalf("the request over the view bound: %d", code)
	}
	s.checkNoEdits(id, before)
	if n := s.compactionCount(id); n != 0 {
		t.Errorf("%d compactions after the failed request, want none", n)
	}
}

// holdSession holds session id's row (SELECT ... FOR UPDATE, in a
// transaction of the test's) until release; waiting is how many backends
// of the test's database wait for a lock.
func holdSession(t *testing.T, url, id string) (waiting func() int, release func()) {
	t.Helper()
	ctx := t.Context()
	db, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	lock, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Exec(ctx, `SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE`, id); err != nil {
		t.Fatal(err)
	}
	mon, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mon.Close(context.Background()) })
	waiting = func() int {
		var n int
		if err := mon.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	release = func() {
		if err := lock.Rollback(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return waiting, release
}

// awaitWaiting waits until n backends wait for a lock (holdSession's
// waiting), at most 20 seconds; what is the last one, for the failure.
func awaitWaiting(t *testing.T, waiting func() int, n int, what string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for waiting() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not wait for the session's row", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// rpcAsync calls method in a goroutine of its own: its HTTP status (0
// when it could not be sent).
func (s *server) rpcAsync(method string, req any) <-chan int {
	code := make(chan int, 1)
	b, _ := json.Marshal(req)
	go func() {
		resp, err := http.Post(s.url("/contextd.v1.ContextService/"+method), "application/json", bytes.NewReader(b))
		if err != nil {
			code <- 0
			return
		}
		resp.Body.Close()
		code <- resp.StatusCode
	}()
	return code
}

// compactionCount is how many compactions ListCompactions lists.
func (s *server) compactionCount(id string) int {
	s.t.Helper()
	return len(s.compactionTiers(id))
}
