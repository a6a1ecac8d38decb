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

// TestRetriedRequestKeepsNoEdits: a request records its client edits,
// another write moves the session before its append (the append meets a
// version conflict and the request is matched again, where nothing is
// left to edit), and the append then fails: the request changed nothing,
// the edits of its first attempt are reverted too. Before, only the edits
// of the last attempt were reverted, and those of the first stayed.
//
// The interleaving is made, not hoped for: the test holds a lock on the
// rows of the session's view, so the request, once its edits are
// committed, waits in the sweep of the view they replaced; meanwhile an
// UpdateSession (labels) queues on the session's row ahead of the append.
func TestRetriedRequestKeepsNoEdits(t *testing.T) {
	url := pgtest.URL(t)
	s := start(t, map[string]string{"CONTEXTD_DATABASE_URL": url, "CONTEXTD_MAX_VIEW_BYTES": "40000"})
	id, before, second := s.overBoundTurn(editDoors["chat"])

	ctx := t.Context()
	db, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	lock, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(context.Background())
	if _, err := lock.Exec(ctx, `SELECT 1 FROM view_entries WHERE session_id = $1 FOR SHARE`, id); err != nil {
		t.Fatal(err)
	}
	mon, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close(context.Background())
	// Backends of the test's database waiting for a lock.
	waiting := func() int {
		var n int
		if err := mon.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

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
	// The edits are committed; the request waits in the sweep.
	deadline := time.Now().Add(20 * time.Second)
	for s.compactionCount(id) == 0 || waiting() < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the request's edits were not recorded")
		}
		time.Sleep(10 * time.Millisecond)
	}
	updated := make(chan int, 1)
	go func() {
		b, _ := json.Marshal(map[string]any{"sessionId": id, "updateMask": "labels", "labels": map[string]string{"moved": "yes"}})
		resp, err := http.Post(s.url("/contextd.v1.ContextService/UpdateSession"), "application/json", bytes.NewReader(b))
		if err != nil {
			updated <- 0
			return
		}
		resp.Body.Close()
		updated <- resp.StatusCode
	}()
	for waiting() < 2 { // the update queued on the session's row
		if time.Now().After(deadline) {
			t.Fatal("the update did not wait for the session")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if code := <-updated; code != http.StatusOK {
		t.Fatalf("UpdateSession: %d", code)
	}
	if code := <-served; code == http.StatusOK || code == 0 {
		t.Fatalf("the request over the view bound: %d", code)
	}
	s.checkNoEdits(id, before)
}

// compactionCount is how many compactions ListCompactions lists.
func (s *server) compactionCount(id string) int {
	s.t.Helper()
	var cmps struct {
		Compactions []any `json:"compactions"`
	}
	s.rpc("ListCompactions", map[string]any{"sessionId": id}, &cmps)
	return len(cmps.Compactions)
}
