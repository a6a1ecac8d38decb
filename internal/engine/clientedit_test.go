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

// resultText is a tool message's result content ("" for other messages).
func resultText(m *chat.Message) string {
	for _, p := range m.Parts {
		if p.Type == chat.PartToolResult {
			return p.ToolResult.Content
		}
	}
	return ""
}

// TestClientEditsAreCompactionsByTheClient: RecordClientEdits puts the
// client's versions of messages in the active view, counted as sent (a
// cleared result less, a longer one more), at most Max a call, each once;
// the log keeps the originals (expandable), a stale version changes
// nothing, a summary later covers the edited messages, and reverting the
// edits restores the view and its count exactly.
func TestClientEditsAreCompactionsByTheClient(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v := agentSession(t, e, compaction.Overrides{AutoCompact: ptr(false)}, 4)
		start, err := e.GetSession(ctx, tenant, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		const cleared = "[Old tool result content cleared]"
		longer := map[string]bool{"msg_7": true} // call_2's result comes back longer
		client := func(stored *chat.Message) (chat.Message, bool) {
			if stored.Role != chat.RoleTool {
				return chat.Message{}, false
			}
			orig := stored.ID
			if o := stored.Metadata[engine.EditOfMetadata]; o != "" {
				orig = o
			}
			want := cleared
			if longer[orig] {
				want = resultText(stored) + " (and the rest of the file)"
				if strings.HasSuffix(resultText(stored), "(and the rest of the file)") {
					return chat.Message{}, false
				}
			}
			if resultText(stored) == want {
				return chat.Message{}, false
			}
			m := *stored
			m.Parts = []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: stored.Parts[0].ToolResult.ToolCallID, Content: want}}}
			return m, true
		}
		// A stale version: nothing is written.
		if _, err := e.RecordClientEdits(ctx, tenant, v.ID, engine.ClientEditInput{Client: client, Expected: start.Version - 1, Created: start.CreatedAt}); !errors.Is(err, store.ErrVersionConflict) {
			t.Fatalf("stale version: %v, want a version conflict", err)
		}
		// At most Max a call: the first two results.
		first, err := e.RecordClientEdits(ctx, tenant, v.ID, engine.ClientEditInput{Client: client, Max: 2, Expected: start.Version, Created: start.CreatedAt})
		if err != nil || first.Edited != 2 || first.Version != start.Version+1 {
			t.Fatalf("first edits: %+v, %v; want 2 at version %d", first, err, start.Version+1)
		}
		view := activeOf(t, e, v.ID)
		var clearedTokens int64
		for _, m := range view {
			if resultText(&m) == cleared {
				clearedTokens += m.Tokens
				if m.Position != 0 || len(m.Replaces) != 1 || m.Kind != chat.KindNormal {
					t.Errorf("edit %s: position %d, replaces %v, kind %q", m.ID, m.Position, m.Replaces, m.Kind)
				}
			}
		}
		mid, _ := e.GetSession(ctx, tenant, v.ID)
		log := logOf(t, e, v.ID)
		saved := log[2].Tokens + log[4].Tokens - clearedTokens
		if got := start.ActiveTokens - mid.ActiveTokens; got != saved || mid.ActiveTokens != sumOf(view) {
			t.Errorf("active tokens %d → %d (the view sums %d); want down by %d", start.ActiveTokens, mid.ActiveTokens, sumOf(view), saved)
		}
		// The next call records the rest: the two other results, one
		// cleared and one longer (counted larger).
		second, err := e.RecordClientEdits(ctx, tenant, v.ID, engine.ClientEditInput{Client: client, Max: 64, Expected: mid.Version, Created: mid.CreatedAt})
		if err != nil || second.Edited != 2 {
			t.Fatalf("second edits: %+v, %v; want 2", second, err)
		}
		edited, _ := e.GetSession(ctx, tenant, v.ID)
		view = activeOf(t, e, v.ID)
		if edited.ActiveTokens != sumOf(view) || view[6].Tokens <= log[6].Tokens {
			t.Errorf("after the longer result: active %d, view sums %d; the longer result counts %d, the original %d", edited.ActiveTokens, sumOf(view), view[6].Tokens, log[6].Tokens)
		}
		// Each edit once: the same versions again record nothing.
		again, err := e.RecordClientEdits(ctx, tenant, v.ID, engine.ClientEditInput{Client: client, Max: 64, Expected: edited.Version, Created: edited.CreatedAt})
		if err != nil || again.Edited != 0 || again.Version != edited.Version {
			t.Errorf("the same versions again: %+v, %v; want nothing recorded", again, err)
		}
		// The log is the originals; each expands byte for byte, and an
		// edit expands to its original.
		for i, m := range logOf(t, e, v.ID) {
			if m.ID != log[i].ID || resultText(&m) != resultText(&log[i]) || m.Tokens != log[i].Tokens {
				t.Errorf("log %d changed", i)
			}
		}
		x, err := e.ExpandMessage(ctx, tenant, v.ID, "msg_3", "")
		if err != nil || resultText(&x.Message) != resultText(&log[2]) {
			t.Errorf("expand msg_3: %v", err)
		}
		x, err = e.ExpandMessage(ctx, tenant, v.ID, view[2].ID, "")
		if err != nil || len(x.Originals) != 1 || x.Originals[0].ID != "msg_3" || resultText(&x.Originals[0]) != resultText(&log[2]) {
			t.Errorf("expand the edit %s: %+v, %v", view[2].ID, x.Originals, err)
		}
		// A summary covers edited messages like any other.
		low := 0.01
		sum, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{Tier: compaction.TierSummarize, Target: &low})
		if err != nil || sum.Compaction == nil {
			t.Fatalf("summarize: %+v, %v", sum, err)
		}
		covered := false
		for _, m := range activeOf(t, e, v.ID) {
			if m.Kind == chat.KindSummary {
				for _, r := range m.Replaces {
					covered = covered || strings.HasPrefix(r, "edit_")
				}
			}
		}
		if !covered {
			t.Errorf("the summary does not cover the edits")
		}
		// Reverting the summary, then the edits, restores the view exactly.
		for _, c := range []string{sum.Compaction.ID, second.Compaction.ID, first.Compaction.ID} {
			if _, err := e.RevertCompaction(ctx, tenant, v.ID, c); err != nil {
				t.Fatalf("revert %s: %v", c, err)
			}
		}
		back, _ := e.GetSession(ctx, tenant, v.ID)
		view = activeOf(t, e, v.ID)
		if back.ActiveTokens != start.ActiveTokens || len(view) != len(log) {
			t.Errorf("after the reverts: active %d (%d messages), want %d (%d)", back.ActiveTokens, len(view), start.ActiveTokens, len(log))
		}
		for i := range view {
			if i < len(log) && view[i].ID != log[i].ID {
				t.Errorf("view %d is %s, want %s", i, view[i].ID, log[i].ID)
			}
		}
	})
}

func activeOf(t *testing.T, e *engine.Engine, id string) []chat.Message {
	t.Helper()
	page, err := e.GetMessages(t.Context(), tenant, id, engine.ViewActive, engine.Page{Size: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return page.Messages
}

func logOf(t *testing.T, e *engine.Engine, id string) []chat.Message {
	t.Helper()
	page, err := e.GetMessages(t.Context(), tenant, id, engine.ViewLog, engine.Page{Size: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return page.Messages
}

func sumOf(msgs []chat.Message) int64 {
	var n int64
	for _, m := range msgs {
		n += m.Tokens
	}
	return n
}

// TestSmallClientEditsWaitForMore: edits that change less text than
// MinBytes in all are not recorded (nothing written) until the client's
// changes add up; past Max, those that change the most go first.
func TestSmallClientEditsWaitForMore(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v := agentSession(t, e, compaction.Overrides{AutoCompact: ptr(false)}, 4)
		grow := map[string]int{} // log id of a result → bytes the client adds to it
		client := func(stored *chat.Message) (chat.Message, bool) {
			orig := stored.ID
			if o := stored.Metadata[engine.EditOfMetadata]; o != "" {
				orig = o
			}
			n, ok := grow[orig]
			if !ok || stored.Role != chat.RoleTool || strings.HasSuffix(resultText(stored), "!") {
				return chat.Message{}, false
			}
			m := *stored
			m.Parts = []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: stored.Parts[0].ToolResult.ToolCallID,
				Content: resultText(stored) + strings.Repeat("!", n)}}}
			return m, true
		}
		record := func(max int) engine.ClientEditResult {
			t.Helper()
			s, err := e.GetSession(ctx, tenant, v.ID)
			if err != nil {
				t.Fatal(err)
			}
			out, err := e.RecordClientEdits(ctx, tenant, v.ID, engine.ClientEditInput{Client: client, Max: max, MinBytes: 25, Expected: s.Version, Created: s.CreatedAt})
			if err != nil {
				t.Fatal(err)
			}
			if out.Edited == 0 && out.Version != s.Version {
				t.Errorf("nothing recorded, yet the version moved %d → %d", s.Version, out.Version)
			}
			return out
		}
		grow["msg_3"], grow["msg_5"] = 10, 10
		if out := record(64); out.Edited != 0 || out.Pending != 2 {
			t.Fatalf("20 bytes changed: %+v; want nothing recorded, 2 pending", out)
		}
		grow["msg_7"] = 500
		if out := record(1); out.Edited != 1 || out.Pending != 2 || out.Compaction.Items[0].Replaced[0] != "msg_7" {
			t.Fatalf("with Max 1: %+v; want msg_7 (the largest change) recorded, 2 pending", out)
		}
		if out := record(64); out.Edited != 0 || out.Pending != 2 {
			t.Fatalf("20 bytes left: %+v; want them pending", out)
		}
		grow["msg_9"] = 10
		if out := record(64); out.Edited != 3 || out.Pending != 0 {
			t.Fatalf("30 bytes: %+v; want the three recorded", out)
		}
	})
}
