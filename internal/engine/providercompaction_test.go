package engine_test

import (
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
)

// TestProviderCompactionRecord: the messages a provider's compaction
// dropped are recorded through RecordClientEdits with the record's tier
// and reason named (ProviderCompactionTier), every one at once (no Max,
// no MinBytes: their text does not change), each version pinned as the
// caller asked and counting 0 tokens (chat.MetaProviderDropped), the
// session's used count down by what they counted; the log keeps the
// originals. Before, a version took its original's pin only, and the
// record was always a client_edit.
func TestProviderCompactionRecord(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v := agentSession(t, e, compaction.Overrides{AutoCompact: ptr(false)}, 4)
		start, err := e.GetSession(ctx, tenant, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		before := activeOf(t, e, v.ID)
		drop := len(before) / 2
		var dropped int64
		for _, m := range before[:drop] {
			dropped += m.Tokens
		}
		ids := map[string]bool{}
		for _, m := range before[:drop] {
			ids[m.ID] = true
		}
		out, err := e.RecordClientEdits(ctx, tenant, v.ID, engine.ClientEditInput{
			Client: func(stored *chat.Message) (chat.Message, bool) {
				if !ids[stored.ID] {
					return chat.Message{}, false
				}
				m := *stored
				m.Metadata = map[string]string{chat.MetaProviderDropped: "1"}
				m.Pinned = true
				return m, true
			},
			Expected: start.Version, Created: start.CreatedAt,
			Tier: engine.ProviderCompactionTier, Reason: "the provider compacted",
		})
		if err != nil || out.Edited != drop {
			t.Fatalf("recorded %+v, %v; want %d", out, err, drop)
		}
		if got := out.Compaction.Tiers; len(got) != 1 || got[0] != engine.ProviderCompactionTier || out.Compaction.Items[0].Reason != "the provider compacted" {
			t.Errorf("record tiers %v, items %+v", got, out.Compaction.Items)
		}
		after := activeOf(t, e, v.ID)
		for i, m := range after[:drop] {
			if m.Tokens != 0 || !m.Pinned || !m.ProviderDropped() {
				t.Errorf("view message %d: %d tokens, pinned %v, dropped %v", i, m.Tokens, m.Pinned, m.ProviderDropped())
			}
		}
		now, err := e.GetSession(ctx, tenant, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got := start.Usage.Used - now.Usage.Used; got != dropped {
			t.Errorf("used fell by %d tokens, the dropped messages counted %d", got, dropped)
		}
	})
}
