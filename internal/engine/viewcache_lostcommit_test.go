package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store/postgres"
)

// TestViewCacheLostCommit: an append of replica A's that the server lost (a
// resendable transaction, synchronous_commit off, and a crash or a
// failover), then replica B's appends from the row before it, leave the
// stored session at A's cached version (or past it) with other messages: A
// answers the stored view, not the one it appended — at the version it
// cached (its write is another) and at a newer one (only the part of its
// entry a read showed is extended). Fails with the cache checked by the
// version alone: A answers its lost message.
func TestViewCacheLostCommit(t *testing.T) {
	r := newLostCommitReplicas(t, 2)
	a, b, db, v, appendOn := r.engines[0], r.engines[1], r.db, r.session, r.appendOn
	// lost runs A's append and then has the server lose it.
	lost := func(text string) {
		t.Helper()
		loseCommit(t, db, v.ID, func() { appendOn(a, text) }, nil)
	}
	check := func(what string) { t.Helper(); r.check(a, what) }
	appendOn(a, "Fix the bug.")
	check("before")
	lost("lost on A")
	appendOn(b, "B's instead") // B's write of A's lost version
	check("at the version A cached")
	lost("lost on A again")
	appendOn(b, "B's instead again")
	appendOn(b, "and one more") // past A's cached version
	check("past the version A cached")
}

// loseCommit runs write and then has the server lose what it committed
// (a resendable transaction, synchronous_commit off, and a crash or a
// failover): the session's row, messages, view and cache-hints row as
// they were before it. between runs after write, before the loss (a read
// that saw the commit the server then lost).
func loseCommit(t *testing.T, db *pgx.Conn, id string, write, between func()) {
	t.Helper()
	ctx := t.Context()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := db.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	tables := []string{"sessions", "messages", "view_entries", "prepared_views"}
	for _, table := range tables {
		exec(fmt.Sprintf(`DROP TABLE IF EXISTS saved_%s`, table))
		where := "session_id"
		if table == "sessions" {
			where = "id"
		}
		exec(fmt.Sprintf(`CREATE TABLE saved_%s AS SELECT * FROM %s WHERE tenant = $1 AND %s = $2`, table, table, where), tenant, id)
	}
	write()
	if between != nil {
		between()
	}
	var cols []string
	rows, err := db.Query(ctx, `SELECT column_name FROM information_schema.columns WHERE table_name = 'sessions'
		AND table_schema = current_schema() ORDER BY ordinal_position`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		cols = append(cols, c)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	list := strings.Join(cols, ", ")
	exec(`DELETE FROM prepared_views WHERE tenant = $1 AND session_id = $2`, tenant, id)
	exec(`DELETE FROM view_entries WHERE tenant = $1 AND session_id = $2`, tenant, id)
	exec(`DELETE FROM messages WHERE tenant = $1 AND session_id = $2`, tenant, id)
	exec(fmt.Sprintf(`UPDATE sessions SET (%s) = (SELECT %s FROM saved_sessions) WHERE tenant = $1 AND id = $2`, list, list), tenant, id)
	exec(`INSERT INTO messages SELECT * FROM saved_messages`)
	exec(`INSERT INTO view_entries SELECT * FROM saved_view_entries`)
	exec(`INSERT INTO prepared_views SELECT * FROM saved_prepared_views`)
	time.Sleep(time.Millisecond) // another replica's clock moved on
}

// lostCommitReplicas are n engines (replicas) on one PostgreSQL, a
// connection to it to lose commits with (loseCommit), and a session
// without auto-compaction that the first made.
type lostCommitReplicas struct {
	t       *testing.T
	engines []*engine.Engine
	store   *postgres.Store // the last engine's
	db      *pgx.Conn
	session engine.SessionView
}

func newLostCommitReplicas(t *testing.T, n int) *lostCommitReplicas {
	t.Helper()
	ctx := t.Context()
	url := pgtest.URL(t)
	models, encodings := testModels(t)
	r := &lostCommitReplicas{t: t}
	for range n {
		s, err := postgres.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		r.engines, r.store = append(r.engines, engine.New(encodings, models, s)), s
	}
	db, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	r.db = db
	off := false
	if r.session, err = r.engines[0].CreateSession(ctx, tenant, engine.NewSession{Model: "gpt-4o", Policy: compaction.Overrides{AutoCompact: &off}}); err != nil {
		t.Fatal(err)
	}
	return r
}

// appendOn appends a user message on e.
func (r *lostCommitReplicas) appendOn(e *engine.Engine, text string) {
	r.t.Helper()
	if _, err := e.AppendMessages(r.t.Context(), tenant, r.session.ID, engine.AppendInput{Messages: []chat.Message{userMsg(text)}}); err != nil {
		r.t.Fatal(err)
	}
}

// check fails unless e's PrepareContext and GetMessages answer the stored
// view.
func (r *lostCommitReplicas) check(e *engine.Engine, what string) {
	t := r.t
	t.Helper()
	ctx := t.Context()
	stored, _, err := r.store.ActiveMessages(ctx, tenant, r.session.ID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.PrepareContext(ctx, tenant, r.session.ID, engine.PrepareInput{})
	if err != nil {
		t.Fatal(err)
	}
	sameMessages(t, what+": PrepareContext", res.Messages, stored)
	page, err := e.GetMessages(ctx, tenant, r.session.ID, engine.ViewActive, engine.Page{Size: 100})
	if err != nil {
		t.Fatal(err)
	}
	sameMessages(t, what+": GetMessages", page.Messages, stored)
}
