package engine_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

func assistantMsg(text string) chat.Message {
	return chat.Message{Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText, Text: text}}}
}

// TestRecordPick: the client's version of the view's last assistant turn
// (a prefill and its continuation) takes both places in the active view,
// counted as the client's; a stale version changes nothing, a turn that
// is no longer the view's tail is not replaced, and reverting the record
// restores the view and its count.
func TestRecordPick(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v := newSession(t, e)
		if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: []chat.Message{
			userMsg("The config as JSON"), assistantMsg("{"), assistantMsg(`"port": 8080}`)}}); err != nil {
			t.Fatal(err)
		}
		start, err := e.GetSession(ctx, tenant, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		before := activeOf(t, e, v.ID)
		tail := []string{before[1].ID, before[2].ID}
		merged := assistantMsg(`{"port": 8080}`)
		in := engine.PickInput{Replaced: tail, Version: merged, Expected: start.Version - 1, Created: start.CreatedAt}
		if _, err := e.RecordPick(ctx, tenant, v.ID, in); !errors.Is(err, store.ErrVersionConflict) {
			t.Fatalf("stale version: %v, want a version conflict", err)
		}
		// Not the view's tail: nothing is written.
		in.Expected, in.Replaced = start.Version, []string{before[0].ID}
		if out, err := e.RecordPick(ctx, tenant, v.ID, in); err != nil || out.Edited != 0 || out.Version != start.Version {
			t.Fatalf("not the tail: %+v, %v; want nothing written", out, err)
		}
		in.Replaced = tail
		out, err := e.RecordPick(ctx, tenant, v.ID, in)
		if err != nil || out.Edited != 1 || out.Version != start.Version+1 || out.Compaction == nil {
			t.Fatalf("pick: %+v, %v", out, err)
		}
		view := activeOf(t, e, v.ID)
		if len(view) != 2 || view[1].Position != 0 || !slices.Equal(view[1].Replaces, tail) || view[1].Metadata[engine.EditOfMetadata] != tail[1] ||
			view[1].Parts[0].Text != `{"port": 8080}` || view[1].Tokens <= 0 {
			t.Fatalf("view after the pick: %+v", view)
		}
		if it := out.Compaction.Items; len(it) != 1 || it[0].Tier != engine.ClientEditTier || it[0].TokensBefore != before[1].Tokens+before[2].Tokens {
			t.Errorf("record items %+v", it)
		}
		if _, err := e.RevertCompaction(ctx, tenant, v.ID, out.Compaction.ID); err != nil {
			t.Fatal(err)
		}
		if got := activeOf(t, e, v.ID); len(got) != 3 || got[1].ID != tail[0] || got[2].ID != tail[1] {
			t.Errorf("view after the revert: %+v", got)
		}
	})
}
