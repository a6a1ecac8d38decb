package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/contextd/contextd/internal/pgtest"
)

// TestRetryInAnotherSessionSendsItsOwnPlaces: what a request found of
// its session's messages (their places in its history, gateway
// assent.go's sentOf) is found again when the request is matched again
// and lands in another session: message ids are "msg_" and the log
// position in every session, so an id does not tell one session's
// message from another's at the same position.
//
// The session is one whose log does not start with the client's history:
// the client compacted it (history "compacted": the compacted history
// appended after the old log), so the client's message n is the log's
// message k+n. The request's edits are planned on that view (the places
// found), then the test deletes the session under the request (holding
// its row, then marking it deleted in the same transaction), so the
// request's append finds it gone and the request is matched again: a new
// session made from its history, whose message n is the log's message n.
// Fails without the reset of the places at each match (gateway
// prepare.go): the new session's messages k+1… went upstream as the
// client's messages 1… (the first session's places), the client's own
// history shifted and repeated.
func TestRetryInAnotherSessionSendsItsOwnPlaces(t *testing.T) {
	url := pgtest.URL(t)
	s := start(t, map[string]string{"CONTEXTD_DATABASE_URL": url})
	c := &historyClient{t: t, s: s, sig: map[string]string{"X-Contextd-Session": "cx"}}
	c.msgs = append(c.msgs, map[string]any{"role": "system", "content": "You are a coding agent."})
	c.user("Fix the failing tests in calc.py.")
	c.rounds(0, 3, "cx")
	kept := c.msgs[len(c.msgs)-2] // the latest output
	c.msgs = []map[string]any{c.msgs[0], c.msgs[1], kept}
	c.user("Summary of the work so far: add() and sub() are fixed, mul() is next.")
	c.user("Go on with mul().")
	if id, history, _ := c.send(); id != "cx" || history != "compacted" {
		t.Fatalf("the compaction: history %q in %q, want compacted in cx", history, id)
	}
	c.rounds(3, 3, "cx") // the compacted history longer than the log before it
	s.waitRecorded("cx")

	c.user("Now run the whole suite.")
	ctx := t.Context()
	db, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	hold, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback(context.Background())
	if _, err := hold.Exec(ctx, `SELECT 1 FROM sessions WHERE id = 'cx' AND deleted_at IS NULL FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	waiting := lockWaiters(t, url)
	type sent struct {
		code int
		body []byte
		err  error
	}
	done := make(chan sent, 1)
	before := len(s.fake.Requests())
	go func() {
		resp, body, err := s.send("/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": c.msgs}, c.sig)
		if err != nil {
			done <- sent{err: err}
			return
		}
		done <- sent{code: resp.StatusCode, body: body}
	}()
	awaitWaiting(t, waiting, 1, "the request") // its edits planned, its places found
	if _, err := hold.Exec(ctx, `UPDATE sessions SET deleted_at = now(), version = version + 1 WHERE id = 'cx' AND deleted_at IS NULL`); err != nil {
		t.Fatal(err)
	}
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.code != 200 {
		t.Fatalf("the request: %d %s %v", r.code, r.body, r.err)
	}
	reqs := s.fake.Requests()
	if len(reqs) != before+1 {
		t.Fatalf("%d upstream requests, want 1", len(reqs)-before)
	}
	var got struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(reqs[len(reqs)-1].Raw, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != len(c.msgs) {
		t.Fatalf("upstream: %d messages, the client sent %d", len(got.Messages), len(c.msgs))
	}
	for i, m := range got.Messages {
		want := c.msgs[i]
		if m.Role != want["role"] || fmt.Sprint(m.Content) != fmt.Sprint(want["content"]) {
			t.Errorf("upstream message %d: %s %.60q, the client sent %s %.60q", i, m.Role, fmt.Sprint(m.Content), want["role"], fmt.Sprint(want["content"]))
		}
	}
}

// lockWaiters is holdSession's count of the backends of the test's
// database that wait for a lock, for a test that holds the row itself.
func lockWaiters(t *testing.T, url string) func() int {
	t.Helper()
	ctx := t.Context()
	mon, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mon.Close(context.Background()) })
	return func() int {
		var n int
		if err := mon.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
}
