package sqlite_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/store"
)

// TestOpenCallsCounted: a transaction that read a session without open
// tool calls answers OpenToolCalls without a statement; one that wrote
// the session's calls, or read a session with some, reads them; the
// triggers' count on the row (migration 00016) follows calls opened,
// answered, reopened by an upsert and deleted with their session.
func TestOpenCallsCounted(t *testing.T) {
	ctx := t.Context()
	s, db := openWithDB(t)
	now := time.Now().UTC()
	tx := func(fn func(ctx context.Context, tx store.Tx) error) {
		t.Helper()
		if err := s.InTx(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	tx(func(ctx context.Context, tx store.Tx) error {
		return tx.InsertSession(ctx, &store.Session{Tenant: "t", ID: "s", Model: "gpt-4o", Version: 1, CreatedAt: now, UpdatedAt: now})
	})
	// open reads the session, then its open calls, and returns them with
	// the statements the read of the calls took.
	open := func() ([]store.ToolCall, int64) {
		t.Helper()
		var calls []store.ToolCall
		var n int64
		tx(func(ctx context.Context, tx store.Tx) error {
			if _, err := tx.GetSession(ctx, "t", "s"); err != nil {
				return err
			}
			n = s.Statements()
			var err error
			calls, err = tx.OpenToolCalls(ctx, "t", "s")
			n = s.Statements() - n
			return err
		})
		return calls, n
	}
	counted := func(step string, want int) {
		t.Helper()
		var n, real int
		if err := db.QueryRow(`SELECT open_calls, (SELECT count(*) FROM tool_calls WHERE result_position = 0) FROM sessions WHERE id = 's'`).Scan(&n, &real); err != nil {
			t.Fatal(err)
		}
		if n != want || real != want {
			t.Fatalf("%s: the row counts %d open calls, the table holds %d; want %d", step, n, real, want)
		}
	}
	if calls, n := open(); len(calls) != 0 || n != 0 {
		t.Fatalf("no calls: %d open calls read in %d statements, want none in none", len(calls), n)
	}
	a, b := store.ToolCall{CallID: "a", Position: 2}, store.ToolCall{CallID: "b", Position: 2}
	tx(func(ctx context.Context, tx store.Tx) error {
		if _, err := tx.GetSession(ctx, "t", "s"); err != nil {
			return err
		}
		if err := tx.PutToolCalls(ctx, "t", "s", []store.ToolCall{a, b}); err != nil {
			return err
		}
		calls, err := tx.OpenToolCalls(ctx, "t", "s")
		if !slices.Equal(calls, []store.ToolCall{a, b}) {
			t.Errorf("calls written in the transaction: %v open, want %v", calls, []store.ToolCall{a, b})
		}
		return err
	})
	counted("two opened", 2)
	if calls, _ := open(); !slices.Equal(calls, []store.ToolCall{a, b}) {
		t.Fatalf("two open calls: read %v", calls)
	}
	answered := a
	answered.ResultPosition = 3
	tx(func(ctx context.Context, tx store.Tx) error {
		return tx.PutToolCalls(ctx, "t", "s", []store.ToolCall{answered})
	})
	counted("one answered", 1)
	tx(func(ctx context.Context, tx store.Tx) error {
		return tx.PutToolCalls(ctx, "t", "s", []store.ToolCall{a})
	})
	counted("reopened by an upsert", 2)
	b.ResultPosition = 3
	tx(func(ctx context.Context, tx store.Tx) error {
		return tx.PutToolCalls(ctx, "t", "s", []store.ToolCall{answered, b})
	})
	counted("both answered", 0)
	if calls, n := open(); len(calls) != 0 || n != 0 {
		t.Fatalf("calls all answered: %d open calls read in %d statements, want none in none", len(calls), n)
	}
	// A deleted session's id made again: its calls go with the archive,
	// and the new session has none.
	putC := func() {
		t.Helper()
		tx(func(ctx context.Context, tx store.Tx) error {
			return tx.PutToolCalls(ctx, "t", "s", []store.ToolCall{{CallID: "c", Position: 4}})
		})
	}
	putC()
	tx(func(ctx context.Context, tx store.Tx) error { return tx.DeleteSession(ctx, "t", "s") })
	tx(func(ctx context.Context, tx store.Tx) error {
		return tx.InsertSession(ctx, &store.Session{Tenant: "t", ID: "s", Model: "gpt-4o", Version: 1, CreatedAt: now, UpdatedAt: now})
	})
	counted("the id made again", 0)
	if calls, _ := open(); len(calls) != 0 {
		t.Fatalf("the id made again: %d open calls", len(calls))
	}
	putC()
	counted("a call of the new session", 1)
	tx(func(ctx context.Context, tx store.Tx) error { return tx.DeleteSession(ctx, "t", "s") })
	if _, err := s.Purge(ctx, time.Now().Add(time.Hour), time.Now()); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := db.QueryRow(`SELECT count(*) FROM tool_calls`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("a purged session left %d tool calls (%v)", left, err)
	}
}
