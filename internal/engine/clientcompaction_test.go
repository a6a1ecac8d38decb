package engine_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

// TestClientCompactionCoversTheView: a client's compaction passed to
// PrepareContext (ViewEdit.Compaction) at a stale version changes
// nothing; at the session's version it empties the view in one record of
// tier client_compaction whose items name every message the view held (a
// client edit by its original), the log unchanged and each original
// expandable; an empty view records nothing; the client's compacted
// history appended after it is the whole view and its count; and
// reverting the record restores the view before it, with what was
// appended since.
func TestClientCompactionCoversTheView(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v := agentSession(t, e, compaction.Overrides{AutoCompact: ptr(false)}, 4)
		start, err := e.GetSession(ctx, tenant, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		// A client edit first: the compaction names its original.
		edit, err := e.RecordClientEdits(ctx, tenant, v.ID, engine.ClientEditInput{Expected: start.Version, Created: start.CreatedAt,
			Client: func(stored *chat.Message) (chat.Message, bool) {
				if stored.ID != "msg_3" {
					return chat.Message{}, false
				}
				m := *stored
				m.Parts = []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: "call_0", Content: "[cleared]"}}}
				return m, true
			}})
		if err != nil || edit.Edited != 1 {
			t.Fatalf("edit: %+v, %v", edit, err)
		}
		before := activeOf(t, e, v.ID)
		log := logOf(t, e, v.ID)
		compact := func(expected int64) (int64, error) {
			res, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{ExpectedVersion: &expected,
				Edits: []engine.ViewEdit{{Compaction: &engine.ClientCompactionInput{}}}})
			return res.Status.Version, err
		}
		if _, err := compact(edit.Version - 1); !errors.Is(err, store.ErrVersionConflict) {
			t.Fatalf("stale version: %v, want a version conflict", err)
		}
		version, err := compact(edit.Version)
		if err != nil || version != edit.Version+1 {
			t.Fatalf("compaction: version %d, %v; want %d", version, err, edit.Version+1)
		}
		s, _ := e.GetSession(ctx, tenant, v.ID)
		if n := len(activeOf(t, e, v.ID)); n != 0 || s.ActiveTokens != 0 || s.ActiveCount != 0 {
			t.Errorf("after the compaction: %d messages in the view, %d tokens, count %d; want none", n, s.ActiveTokens, s.ActiveCount)
		}
		page, err := e.ListCompactions(ctx, tenant, v.ID, engine.Page{})
		if err != nil {
			t.Fatal(err)
		}
		rec := page.Compactions[len(page.Compactions)-1]
		var covered []string
		next := fmt.Sprintf("msg_%d", len(log)+1) // the compacted history's first message
		for _, it := range rec.Items {
			covered = append(covered, it.Replaced...)
			if it.NewID != next {
				t.Errorf("item %+v: new message %q, want %s", it, it.NewID, next)
			}
		}
		if !slices.Equal(rec.Tiers, []string{engine.ClientCompactionTier}) || len(covered) != len(before) || !slices.Contains(covered, "msg_3") {
			t.Errorf("record %v covers %v; want tier client_compaction over the view's %d messages, msg_3 for its edit", rec.Tiers, covered, len(before))
		}
		if got := logOf(t, e, v.ID); len(got) != len(log) {
			t.Errorf("the log has %d messages, had %d", len(got), len(log))
		}
		x, err := e.ExpandMessage(ctx, tenant, v.ID, "msg_3", "")
		if err != nil || resultText(&x.Message) != resultText(&log[2]) {
			t.Errorf("expand msg_3: %v", err)
		}
		// Nothing left to cover: nothing recorded.
		if again, err := compact(version); err != nil || again != version {
			t.Errorf("an empty view: version %d, %v; want nothing recorded (%d)", again, err, version)
		}
		if again, _ := e.ListCompactions(ctx, tenant, v.ID, engine.Page{}); len(again.Compactions) != len(page.Compactions) {
			t.Errorf("an empty view: %d records, had %d", len(again.Compactions), len(page.Compactions))
		}
		// The client's compacted history is the view and its count.
		compacted := []chat.Message{userMsg("Fix the failing test in src/app.py."), userMsg("Summary: steps 0 to 3 are done.")}
		res, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: compacted, ExpectedVersion: &version})
		if err != nil {
			t.Fatal(err)
		}
		view := activeOf(t, e, v.ID)
		if view[0].ID != next {
			t.Errorf("the compacted history starts at %s, the record names %s", view[0].ID, next)
		}
		s, _ = e.GetSession(ctx, tenant, v.ID)
		if len(res.Messages) != 2 || len(view) != 2 || s.ActiveTokens != sumOf(view) {
			t.Errorf("after the append: %d messages sent, a view of %d, %d tokens (the view sums %d)", len(res.Messages), len(view), s.ActiveTokens, sumOf(view))
		}
		// Reverted: the view before, and what was appended since.
		if _, err := e.RevertCompaction(ctx, tenant, v.ID, rec.ID); err != nil {
			t.Fatal(err)
		}
		restored := activeOf(t, e, v.ID)
		if len(restored) != len(before)+2 || restored[2].ID != before[2].ID || restored[len(before)].ID != view[0].ID {
			t.Errorf("reverted: a view of %d messages, want the %d before and the 2 appended", len(restored), len(before))
		}
	})
}
