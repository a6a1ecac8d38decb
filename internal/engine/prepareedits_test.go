package engine_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

// TestPrepareRecordsEditsWithTheAppend: client edits passed to
// PrepareContext (PrepareInput.Edits) are written in its transaction:
// with a stale version, or an append that fails, nothing is recorded; a
// call that appends and compacts (the edits make the view pass the
// compaction threshold) records the edit and the compaction in order,
// the edit's record first, and the view counts the client's version.
func TestPrepareRecordsEditsWithTheAppend(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v := agentSession(t, e, compaction.Overrides{}, 8)
		start, err := e.GetSession(ctx, tenant, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		longer := "step 0: " + strings.Repeat("the whole file, longer than it was ", 400)
		edits := []engine.ViewEdit{{Client: &engine.ClientEditInput{Client: func(stored *chat.Message) (chat.Message, bool) {
			if stored.Role != chat.RoleTool || resultText(stored) == longer || !strings.HasPrefix(resultText(stored), "step 0:") {
				return chat.Message{}, false
			}
			m := *stored
			m.Parts = []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: stored.Parts[0].ToolResult.ToolCallID, Content: longer}}}
			return m, true
		}}}}
		count := func() int {
			page, err := e.ListCompactions(ctx, tenant, v.ID, engine.Page{Size: 100})
			if err != nil {
				t.Fatal(err)
			}
			return len(page.Compactions)
		}
		// A stale version: nothing.
		stale := start.Version - 1
		if _, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: []chat.Message{userMsg("go on")}, ExpectedVersion: &stale, Edits: edits}); !errors.Is(err, store.ErrVersionConflict) {
			t.Fatalf("stale version: %v, want a version conflict", err)
		}
		// An append that fails (a result without its call): nothing.
		expected := start.Version
		if _, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: []chat.Message{resultMsg("nope", "x")}, ExpectedVersion: &expected, Edits: edits}); err == nil {
			t.Fatal("an append of a result without its call was taken")
		}
		if n := count(); n != 0 {
			t.Fatalf("%d compactions after failed calls, want none", n)
		}
		// The edit makes the view pass the threshold: edit and compaction
		// in one call.
		res, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: []chat.Message{userMsg("go on")}, ExpectedVersion: &expected, Edits: edits})
		if err != nil {
			t.Fatal(err)
		}
		page, err := e.ListCompactions(ctx, tenant, v.ID, engine.Page{Size: 100})
		if err != nil {
			t.Fatal(err)
		}
		var tiers []string
		for _, c := range page.Compactions {
			tiers = append(tiers, strings.Join(c.Tiers, "+"))
		}
		t.Logf("compacted %v, used %d, records %v", res.Status.Compacted, res.Status.Usage.Used, tiers)
		if !res.Status.Compacted || len(page.Compactions) != 2 || !strings.Contains(strings.Join(tiers, " "), engine.ClientEditTier) {
			t.Fatalf("compacted %v, records %v; want the client edit and a compaction", res.Status.Compacted, tiers)
		}
		after, err := e.GetSession(ctx, tenant, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status.Version != after.Version || after.Version <= start.Version+1 {
			t.Errorf("status version %d, session %d (started at %d)", res.Status.Version, after.Version, start.Version)
		}
		var sum int64
		for _, m := range activeOf(t, e, v.ID) {
			sum += m.Tokens
		}
		if sum != after.ActiveTokens {
			t.Errorf("the view counts %d tokens, the session %d", sum, after.ActiveTokens)
		}
	})
}
