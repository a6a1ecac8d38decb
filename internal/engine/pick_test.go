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

// TestPrepareRecordsAPick: the client's version of the view's last
// assistant turn (a prefill and its continuation), passed to
// PrepareContext (ViewEdit.Pick), takes both places in the active view,
// counted as the client's; a stale version changes nothing, a turn that
// is no longer the view's tail is not replaced (nothing written), and
// reverting the record restores the view and its count.
func TestPrepareRecordsAPick(t *testing.T) {
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
		pick := func(expected int64, replaced []string) (engine.PrepareResult, error) {
			return e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{ExpectedVersion: &expected,
				Edits: []engine.ViewEdit{{Pick: &engine.PickInput{Replaced: replaced, Version: assistantMsg(`{"port": 8080}`)}}}})
		}
		if _, err := pick(start.Version-1, tail); !errors.Is(err, store.ErrVersionConflict) {
			t.Fatalf("stale version: %v, want a version conflict", err)
		}
		// Not the view's tail: nothing is written.
		if res, err := pick(start.Version, []string{before[0].ID}); err != nil || res.Status.Version != start.Version {
			t.Fatalf("not the tail: version %d, %v; want nothing written (%d)", res.Status.Version, err, start.Version)
		}
		res, err := pick(start.Version, tail)
		if err != nil || res.Status.Version != start.Version+1 {
			t.Fatalf("pick: version %d, %v; want %d", res.Status.Version, err, start.Version+1)
		}
		view := activeOf(t, e, v.ID)
		if len(view) != 2 || view[1].Position != 0 || !slices.Equal(view[1].Replaces, tail) || view[1].Metadata[engine.EditOfMetadata] != tail[1] ||
			view[1].Parts[0].Text != `{"port": 8080}` || view[1].Tokens <= 0 {
			t.Fatalf("view after the pick: %+v", view)
		}
		page, err := e.ListCompactions(ctx, tenant, v.ID, engine.Page{})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Compactions) != 1 {
			t.Fatalf("%d records, want the pick's", len(page.Compactions))
		}
		rec := page.Compactions[0]
		if it := rec.Items; len(it) != 1 || it[0].Tier != engine.ClientEditTier || it[0].TokensBefore != before[1].Tokens+before[2].Tokens {
			t.Errorf("record items %+v", it)
		}
		if _, err := e.RevertCompaction(ctx, tenant, v.ID, rec.ID); err != nil {
			t.Fatal(err)
		}
		if got := activeOf(t, e, v.ID); len(got) != 3 || got[1].ID != tail[0] || got[2].ID != tail[1] {
			t.Errorf("view after the revert: %+v", got)
		}
	})
}
