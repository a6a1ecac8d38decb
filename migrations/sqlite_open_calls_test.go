package migrations

import (
	"context"
	"database/sql"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite"
)

// TestSQLiteOpenCallsUpDownUp: migration 00016 counts each session's
// open tool calls on its row, the triggers keep the count as calls are
// opened, answered and deleted, and going down drops the column.
func TestSQLiteOpenCallsUpDownUp(t *testing.T) {
	ctx := context.Background()
	db, p := sqliteAt(t, 15)
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, id := range []string{"a", "b"} {
		exec(`INSERT INTO sessions (tenant, id, model, version, created_at, updated_at) VALUES ('t', ?, 'm', 1, 1, 1)`, id)
	}
	for i, result := range []int{0, 0, 5} { // two open, one answered
		exec(`INSERT INTO tool_calls (tenant, session_id, call_id, position, result_position) VALUES ('t', 'a', ?, 2, ?)`, i, result)
	}
	counted := func(step string, a, b int) {
		t.Helper()
		var gotA, gotB int
		if err := db.QueryRowContext(ctx, `SELECT (SELECT open_calls FROM sessions WHERE id = 'a'), (SELECT open_calls FROM sessions WHERE id = 'b')`).Scan(&gotA, &gotB); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if gotA != a || gotB != b {
			t.Fatalf("%s: open calls counted %d and %d, want %d and %d", step, gotA, gotB, a, b)
		}
	}
	if _, err := p.UpTo(ctx, 16); err != nil {
		t.Fatal(err)
	}
	counted("up", 2, 0)
	exec(`INSERT INTO tool_calls (tenant, session_id, call_id, position, result_position) VALUES ('t', 'b', 'x', 4, 0)`)
	counted("a call opened", 2, 1)
	exec(`UPDATE tool_calls SET result_position = 5 WHERE call_id = 'x'`)
	counted("answered", 2, 0)
	exec(`DELETE FROM tool_calls WHERE session_id = 'a' AND call_id = '0'`)
	counted("an open call deleted", 1, 0)
	if _, err := p.Down(ctx); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, `SELECT open_calls FROM sessions`).Err(); err == nil {
		t.Fatal("down: the column is still there")
	}
	if _, err := p.UpTo(ctx, 16); err != nil {
		t.Fatal(err)
	}
	counted("up again", 1, 0)
}

// sqliteAt is a new SQLite database migrated up to version, and the
// provider that migrates it on.
func sqliteAt(t *testing.T, version int64) (*sql.DB, *goose.Provider) {
	t.Helper()
	dsn := "file:" + filepath.ToSlash(filepath.Join(t.TempDir(), "m.db")) + "?_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	sub, err := fs.Sub(files, "sqlite")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db, sub, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(t.Context(), version); err != nil {
		t.Fatal(err)
	}
	return db, p
}
