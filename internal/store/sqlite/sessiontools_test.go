package sqlite_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// TestSessionToolsApart: a session's tools of 1 KB or more live in
// session_tools (migration 00016), written only when they change — the
// test's trigger counts the writes of that table — and read back equal,
// whether the transaction read the session first or not, long or short,
// changed or not; deleting the session (purged) or reusing a deleted id
// leaves no row of it there.
func TestSessionToolsApart(t *testing.T) {
	ctx := t.Context()
	s, db := openWithDB(t)
	for _, q := range []string{
		`CREATE TABLE test_tools_writes (n INTEGER NOT NULL)`,
		`INSERT INTO test_tools_writes VALUES (0)`,
		`CREATE TRIGGER test_tools_inserted AFTER INSERT ON session_tools BEGIN UPDATE test_tools_writes SET n = n + 1; END`,
		`CREATE TRIGGER test_tools_updated AFTER UPDATE ON session_tools BEGIN UPDATE test_tools_writes SET n = n + 1; END`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	query := func(q string, args ...any) int {
		t.Helper()
		var n int
		if err := db.QueryRow(q, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	writes := func() int { t.Helper(); return query(`SELECT n FROM test_tools_writes`) }
	tools := func(n int, tag string) []chat.Tool {
		out := make([]chat.Tool, n)
		for i := range out {
			out[i] = chat.Tool{Name: fmt.Sprint("tool_", i), Description: strings.Repeat(tag+" does a thing. ", 20), Parameters: `{"type":"object"}`}
		}
		return out
	}
	big, bigger, small := tools(10, "big"), tools(12, "bigger"), tools(1, "s")
	now := time.Now().UTC().Truncate(time.Microsecond)
	sess := &store.Session{Tenant: "t", ID: "s1", Model: "gpt-4o", Tools: big, Version: 1, CreatedAt: now, UpdatedAt: now}
	tx := func(fn func(ctx context.Context, tx store.Tx) error) {
		t.Helper()
		if err := s.InTx(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	check := func(step string, want []chat.Tool, apart bool) {
		t.Helper()
		got, err := s.GetSession(ctx, "t", "s1")
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if !slices.Equal(got.Tools, want) {
			t.Fatalf("%s: read back %d tools, want %d", step, len(got.Tools), len(want))
		}
		var inTx store.Session
		tx(func(ctx context.Context, tx store.Tx) (err error) {
			inTx, err = tx.GetSession(ctx, "t", "s1")
			return err
		})
		if !slices.Equal(inTx.Tools, want) {
			t.Fatalf("%s: read back in a transaction %d tools, want %d", step, len(inTx.Tools), len(want))
		}
		rows, inRow := query(`SELECT count(*) FROM session_tools`), query(`SELECT length(tools) FROM sessions WHERE id = 's1'`)
		if apart && (rows != 1 || inRow != 0) || !apart && (rows != 0 || inRow == 0) {
			t.Fatalf("%s: %d rows in session_tools, %d bytes of tools in the session row; want them apart: %v", step, rows, inRow, apart)
		}
	}
	update := func(tools []chat.Tool, read bool) {
		t.Helper()
		tx(func(ctx context.Context, tx store.Tx) error {
			if read {
				cur, err := tx.GetSession(ctx, "t", "s1")
				if err != nil {
					return err
				}
				sess.Version = cur.Version
			}
			sess.Tools, sess.Version = tools, sess.Version+1
			return tx.UpdateSession(ctx, sess)
		})
	}

	tx(func(ctx context.Context, tx store.Tx) error { return tx.InsertSession(ctx, sess) })
	check("inserted", big, true)
	w := writes()
	for range 3 {
		update(big, true)
	}
	if got := writes() - w; got != 0 {
		t.Errorf("3 updates with the tools unchanged wrote session_tools %d times, want 0", got)
	}
	check("unchanged", big, true)
	update(bigger, true)
	if got := writes() - w; got != 1 {
		t.Errorf("an update that changed the tools wrote session_tools %d times, want 1", got)
	}
	check("changed", bigger, true)
	update(big, false)
	check("changed without a read", big, true)
	update(small, true)
	check("short", small, false)
	update(big, false)
	check("long again, without a read", big, true)
	update(small, false)
	check("short again, without a read", small, false)
	update(big, true)

	tx(func(ctx context.Context, tx store.Tx) error { return tx.DeleteSession(ctx, "t", "s1") })
	if _, err := s.Purge(ctx, time.Now().Add(time.Hour), time.Now()); err != nil {
		t.Fatal(err)
	}
	if n := query(`SELECT count(*) FROM session_tools`); n != 0 {
		t.Errorf("a purged session left %d rows in session_tools", n)
	}

	sess = &store.Session{Tenant: "t", ID: "s1", Model: "gpt-4o", Tools: big, Version: 1, CreatedAt: now, UpdatedAt: now}
	tx(func(ctx context.Context, tx store.Tx) error { return tx.InsertSession(ctx, sess) })
	tx(func(ctx context.Context, tx store.Tx) error { return tx.DeleteSession(ctx, "t", "s1") })
	sess = &store.Session{Tenant: "t", ID: "s1", Model: "gpt-4o", Tools: small, Version: 1, CreatedAt: now, UpdatedAt: now}
	tx(func(ctx context.Context, tx store.Tx) error { return tx.InsertSession(ctx, sess) })
	check("a deleted id reused", small, false)
}
