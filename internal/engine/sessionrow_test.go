package engine_test

import (
	"testing"

	"github.com/contextd/contextd/internal/chat"
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
