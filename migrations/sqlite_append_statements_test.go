package migrations

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

// TestSQLiteAppendStatementsUpDownUp: migration 00015 (the history index
// and the view's entries rebuilt WITHOUT ROWID, the head's trigger) keeps
// every row of a database that holds data, going up, down and up again:
// the rows, their heads (one a session), the indexes, and the trigger
// only while the migration is applied; the trigger keeps one head a
// session through appends, a re-indexed head and a fork's rows.
func TestSQLiteAppendStatementsUpDownUp(t *testing.T) {
	ctx := context.Background()
	db, p := sqliteAt(t, 13)
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// Two tenants' sessions, each with a log, a history index (a head
	// each) and entries in two view generations.
	for _, tenant := range []string{"a", "b"} {
		for _, id := range []string{"s1", "s2"} {
			exec(`INSERT INTO sessions (tenant, id, model, version, created_at, updated_at, view_gen) VALUES (?, ?, 'm', 1, 1, 1, 1)`, tenant, id)
			for i := 1; i <= 5; i++ {
				mid := fmt.Sprint("m", i)
				exec(`INSERT INTO messages (tenant, session_id, id, position, role, kind, parts, tokens, created_at) VALUES (?, ?, ?, ?, 'user', 'message', '[]', 1, 1)`,
					tenant, id, mid, i)
				exec(`INSERT INTO history_index (tenant, session_id, length, chain, head) VALUES (?, ?, ?, ?, ?)`,
					tenant, id, i, fmt.Sprint(tenant, id, "-chain", i), i == 5)
				exec(`INSERT INTO view_entries (tenant, session_id, gen, ord, message_id) VALUES (?, ?, 0, ?, ?), (?, ?, 1, ?, ?)`,
					tenant, id, i, mid, tenant, id, i, mid)
			}
		}
	}
	rows := func(q string) [][]any {
		t.Helper()
		r, err := db.QueryContext(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		defer r.Close()
		cols, _ := r.Columns()
		var out [][]any
		for r.Next() {
			row := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range row {
				ptrs[i] = &row[i]
			}
			if err := r.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			out = append(out, row)
		}
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	const (
		history = `SELECT tenant, session_id, length, chain, head FROM history_index ORDER BY 1, 2, 3`
		views   = `SELECT tenant, session_id, gen, ord, message_id FROM view_entries ORDER BY 1, 2, 3, 4`
	)
	wantHistory, wantViews := rows(history), rows(views)
	if len(wantHistory) != 20 || len(wantViews) != 40 {
		t.Fatalf("seeded %d history rows, %d view entries", len(wantHistory), len(wantViews))
	}
	schema := func(kind, name string) string {
		t.Helper()
		var s string
		err := db.QueryRowContext(ctx, `SELECT sql FROM sqlite_master WHERE type = ? AND name = ?`, kind, name).Scan(&s)
		if err == sql.ErrNoRows {
			return ""
		}
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	check := func(step string, applied bool) {
		t.Helper()
		if got := rows(history); !reflect.DeepEqual(got, wantHistory) {
			t.Fatalf("%s: history index %v, want %v", step, got, wantHistory)
		}
		if got := rows(views); !reflect.DeepEqual(got, wantViews) {
			t.Fatalf("%s: view entries %v, want %v", step, got, wantViews)
		}
		for _, table := range []string{"history_index", "view_entries"} {
			if got := strings.Contains(schema("table", table), "WITHOUT ROWID"); got != applied {
				t.Fatalf("%s: %s WITHOUT ROWID %v, want %v", step, table, got, applied)
			}
		}
		for _, index := range []string{"history_index_chain", "history_index_head"} {
			if schema("index", index) == "" {
				t.Fatalf("%s: index %s missing", step, index)
			}
		}
		if got := schema("trigger", "history_head_moved") != ""; got != applied {
			t.Fatalf("%s: trigger history_head_moved present %v, want %v", step, got, applied)
		}
		if r := rows(`PRAGMA foreign_key_check`); len(r) != 0 {
			t.Fatalf("%s: foreign keys broken: %v", step, r)
		}
	}
	check("at 13", false)
	if _, err := p.UpTo(ctx, 15); err != nil {
		t.Fatal(err)
	}
	check("up to 15", true)
	if _, err := p.DownTo(ctx, 13); err != nil {
		t.Fatal(err)
	}
	check("down to 13", false)
	if _, err := p.UpTo(ctx, 15); err != nil {
		t.Fatal(err)
	}
	check("up again", true)

	// The trigger: each insert of a head moves it; one head a session.
	heads := func(step string, want map[string]int64) {
		t.Helper()
		got := map[string]int64{}
		for _, r := range rows(`SELECT tenant || '/' || session_id, length FROM history_index WHERE head = 1`) {
			k := r[0].(string)
			if _, dup := got[k]; dup {
				t.Fatalf("%s: session %s has two heads", step, k)
			}
			got[k] = r[1].(int64)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: heads %v, want %v", step, got, want)
		}
	}
	upsert := `INSERT INTO history_index (tenant, session_id, length, chain, head) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (tenant, session_id, length) DO UPDATE SET chain = excluded.chain, head = excluded.head`
	heads("before", map[string]int64{"a/s1": 5, "a/s2": 5, "b/s1": 5, "b/s2": 5})
	exec(upsert, "a", "s1", 6, "x6", false)
	exec(upsert, "a", "s1", 7, "x7", true)
	heads("appended", map[string]int64{"a/s1": 7, "a/s2": 5, "b/s1": 5, "b/s2": 5})
	exec(upsert, "a", "s1", 7, "x7'", true) // the head itself indexed again
	heads("head re-indexed", map[string]int64{"a/s1": 7, "a/s2": 5, "b/s1": 5, "b/s2": 5})
	exec(upsert, "a", "s1", 3, "x3'", true) // a shorter history's head
	heads("head moved back", map[string]int64{"a/s1": 3, "a/s2": 5, "b/s1": 5, "b/s2": 5})
	// A fork of a/s1: its own rows, its own head; the parent's stays.
	exec(`INSERT INTO sessions (tenant, id, model, version, created_at, updated_at) VALUES ('a', 'f', 'm', 1, 1, 1)`)
	exec(`INSERT INTO history_index (tenant, session_id, length, chain, head) VALUES ('a', 'f', 1, 'asx1', 0), ('a', 'f', 2, 'asx2', 1)`)
	heads("forked", map[string]int64{"a/s1": 3, "a/f": 2, "a/s2": 5, "b/s1": 5, "b/s2": 5})
	exec(`DELETE FROM sessions WHERE tenant = 'a' AND id = 's1'`)
	heads("parent deleted", map[string]int64{"a/f": 2, "a/s2": 5, "b/s1": 5, "b/s2": 5})
	exec(`INSERT INTO history_index (tenant, session_id, length, chain, head) VALUES ('a', 'f', 3, 'fx3', 1)`)
	heads("fork appended", map[string]int64{"a/f": 3, "a/s2": 5, "b/s1": 5, "b/s2": 5})
}
