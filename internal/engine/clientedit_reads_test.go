package engine_test

import (
	"context"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

// countSessionReads is a real store that counts its reads of a session's
// row outside transactions.
type countSessionReads struct {
	store.Store
	n *int
}

func (s countSessionReads) GetSession(ctx context.Context, tenant, id string) (store.Session, error) {
	*s.n++
	return s.Store.GetSession(ctx, tenant, id)
}

// TestClientEditsReadTheSessionOnce: RecordClientEdits on a view the
// cache does not hold reads the session's row once with the view (the
// read before it and the one that confirms its version, viewOf), not
// again before it writes. On both stores; reading it again in
// RecordClientEdits made it three reads.
func TestClientEditsReadTheSessionOnce(t *testing.T) {
	models, encodings := testModels(t)
	backendStores(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		reads := 0
		e := engine.New(encodings, models, countSessionReads{st, &reads}, engine.WithViewCacheBytes(0))
		v := agentSession(t, e, compaction.Overrides{AutoCompact: ptr(false)}, 2)
		start, err := e.GetSession(ctx, tenant, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		client := func(stored *chat.Message) (chat.Message, bool) {
			if stored.Role != chat.RoleTool {
				return chat.Message{}, false
			}
			m := *stored
			m.Parts = []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{
				ToolCallID: stored.Parts[0].ToolResult.ToolCallID, Content: "[Old tool result content cleared]"}}}
			return m, true
		}
		reads = 0
		res, err := e.RecordClientEdits(ctx, tenant, v.ID, engine.ClientEditInput{Client: client, Expected: start.Version, Created: start.CreatedAt})
		if err != nil || res.Edited == 0 {
			t.Fatalf("edits: %+v, %v", res, err)
		}
		if reads != 2 {
			t.Errorf("RecordClientEdits read the session %d times; want 2 (the view's read and its confirmation)", reads)
		}
	})
}
