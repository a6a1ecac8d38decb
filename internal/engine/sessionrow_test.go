package engine_test

import (
	"strings"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/store"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
)

// TestPrepareFromAnOvertakenRow: PrepareContext started from a session
// row the caller read before another append (PrepareInput.Read, as the
// gateway passes the row its match read) answers the view as it is — the
// other append's message included, the new one after it, each once — and
// stores the append at the session's version, not the row's; a row of
// another session is not used. Both stores. Two checks hold it: the view
// cache serves a view only at the version it is asked for, and the
// transaction takes it only at the version it locks; either alone keeps
// this test green.
func TestPrepareFromAnOvertakenRow(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v := newSession(t, e)
		other := newSession(t, e)
		if _, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: []chat.Message{userMsg("one")}}); err != nil {
			t.Fatal(err)
		}
		row, err := e.SessionRow(ctx, tenant, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		otherRow, err := e.SessionRow(ctx, tenant, other.ID)
		if err != nil {
			t.Fatal(err)
		}
		// Another caller appends after the row was read.
		if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: []chat.Message{userMsg("two")}}); err != nil {
			t.Fatal(err)
		}
		res, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: []chat.Message{userMsg("three")}, Read: &row})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range res.Messages {
			got = append(got, m.Parts[0].Text)
		}
		if len(got) != 3 || got[0] != "one" || got[1] != "two" || got[2] != "three" {
			t.Errorf("view from an overtaken row: %q, want [one two three]", got)
		}
		if res.Status.Version != row.Version+2 {
			t.Errorf("version %d after two appends past the row's %d", res.Status.Version, row.Version)
		}
		res, err = e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: []chat.Message{userMsg("four")}, Read: &otherRow})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(res.Messages); n != 4 || res.Messages[3].Parts[0].Text != "four" {
			t.Errorf("with another session's row: %d messages, want 4 ending in four", n)
		}
	})
}

// TestPrepareFromARowOfAReplacedSession: another replica deletes the
// session and creates one of the same id, brought to the same version and
// the same count of active messages, between the caller's read of the row
// (PrepareInput.Read) and PrepareContext: the call works on the new
// session's view, never on the deleted one's that this replica's view
// cache holds at that version (a version is no identity across a delete
// and a create; the session's creation time is). The deleted session's
// view is one the next message takes past the answer's size cap, the new
// one's is small: working on the deleted view refuses the call.
func TestPrepareFromARowOfAReplacedSession(t *testing.T) {
	models, encodings := testModels(t)
	backendStores(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		limits := engine.WithLimits(engine.Limits{MaxResponseBytes: 64 << 10})
		e := engine.New(encodings, models, st, limits)
		replica := engine.New(encodings, models, st, limits)
		const id = "replaced"
		off := false
		policy := compaction.Overrides{AutoCompact: &off}
		if _, err := e.CreateSession(ctx, tenant, engine.NewSession{ID: id, Model: "gpt-4o", Policy: policy}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.PrepareContext(ctx, tenant, id, engine.PrepareInput{Messages: []chat.Message{userMsg(strings.Repeat("deleted ", 6000))}}); err != nil {
			t.Fatal(err)
		}
		// This replica's view cache holds the session's view at its version.
		if _, err := e.PrepareContext(ctx, tenant, id, engine.PrepareInput{}); err != nil {
			t.Fatal(err)
		}
		row, err := e.SessionRow(ctx, tenant, id)
		if err != nil {
			t.Fatal(err)
		}
		if err := replica.DeleteSession(ctx, tenant, id); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // another creation time, at the stores' microseconds
		if _, err := replica.CreateSession(ctx, tenant, engine.NewSession{ID: id, Model: "gpt-4o", Policy: policy}); err != nil {
			t.Fatal(err)
		}
		now, err := replica.PrepareContext(ctx, tenant, id, engine.PrepareInput{Messages: []chat.Message{userMsg("new")}})
		if err != nil {
			t.Fatal(err)
		}
		if now.Status.Version != row.Version || now.Status.LogCount != row.LogCount {
			t.Fatalf("the new session is at version %d (%d messages), the row at %d (%d): the case is not set up",
				now.Status.Version, now.Status.LogCount, row.Version, row.LogCount)
		}
		res, err := e.PrepareContext(ctx, tenant, id, engine.PrepareInput{Messages: []chat.Message{userMsg(strings.Repeat("next ", 4000))}, Read: &row})
		if err != nil {
			t.Fatalf("prepare from the row of a deleted session of the same id: %v", err)
		}
		if len(res.Messages) != 2 || res.Messages[0].Parts[0].Text != "new" {
			t.Errorf("view from the row of a deleted session of the same id: %d messages, want the new one's and the next", len(res.Messages))
		}
	})
}
