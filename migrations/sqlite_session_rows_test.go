package migrations

import (
	"context"
	"database/sql"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite"
)

// TestSQLiteSessionToolsUpDownUp: migration 00016 moves the tools of 1 KB
// or more out of the session rows into session_tools (” left in the
// row), leaves shorter ones in place, and puts them back going down.
func TestSQLiteSessionToolsUpDownUp(t *testing.T) {
	ctx := context.Background()
	db, p := sqliteAt(t, 15)
	long := `[{"name":"read","description":"` + strings.Repeat("é", 600) + `"}]` // 1,200 bytes, 600 characters
	short := `[{"name":"read"}]`
	for id, tools := range map[string]string{"long": long, "short": short} {
		if _, err := db.ExecContext(ctx, `INSERT INTO sessions (tenant, id, model, tools, version, created_at, updated_at) VALUES ('t', ?, 'm', ?, 1, 1, 1)`, id, tools); err != nil {
			t.Fatal(err)
		}
	}
	for i, result := range []int{0, 0, 5} { // two open, one answered
		if _, err := db.ExecContext(ctx, `INSERT INTO tool_calls (tenant, session_id, call_id, position, result_position) VALUES ('t', 'long', ?, 2, ?)`, i, result); err != nil {
			t.Fatal(err)
		}
	}
	inRow := func(id string) string {
		t.Helper()
		var s string
		if err := db.QueryRowContext(ctx, `SELECT tools FROM sessions WHERE id = ?`, id).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	apart := func() map[string]string {
		t.Helper()
		rows, err := db.QueryContext(ctx, `SELECT session_id, tools FROM session_tools`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]string{}
		for rows.Next() {
			var id, tools string
			if err := rows.Scan(&id, &tools); err != nil {
				t.Fatal(err)
			}
			out[id] = tools
		}
		return out
	}
	for _, step := range []string{"up", "down", "up again"} {
		var err error
		if step == "down" {
			_, err = p.Down(ctx)
		} else {
			_, err = p.UpTo(ctx, 16)
		}
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if inRow("short") != short {
			t.Fatalf("%s: the short tools left the row", step)
		}
		if step == "down" {
			if inRow("long") != long {
				t.Fatalf("down: the long tools are not back in the row")
			}
			continue
		}
		if got := apart(); inRow("long") != "" || len(got) != 1 || got["long"] != long {
			t.Fatalf("%s: the long tools were not moved apart (%d rows)", step, len(got))
		}
		var open, none int
		if err := db.QueryRowContext(ctx, `SELECT (SELECT open_calls FROM sessions WHERE id = 'long'), (SELECT open_calls FROM sessions WHERE id = 'short')`).Scan(&open, &none); err != nil {
			t.Fatal(err)
		}
		if open != 2 || none != 0 {
			t.Fatalf("%s: open calls counted %d and %d, want 2 and 0", step, open, none)
		}
	}
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
