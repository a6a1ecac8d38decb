package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

// TestRetentionSweepsSupersededClientEdits: a client that edits one old
// message again and again (a new version each call) leaves one stored
// message a call. Once their compactions can no longer be reverted,
// retention keeps only the original and the version in the active view:
// an edit of an edit stands for the original, not for the version before
// it, so the versions in between are no original of anything. Before, each
// edit's record named the version before it as what it replaced, and the
// chain kept every version ever sent for as long as the session lived.
func TestRetentionSweepsSupersededClientEdits(t *testing.T) {
	models, encodings := testModels(t)
	backendStores(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		e := engine.New(encodings, models, st)
		v := agentSession(t, e, compaction.Overrides{AutoCompact: ptr(false)}, 4)
		version := 0
		client := func(stored *chat.Message) (chat.Message, bool) {
			orig := stored.ID
			if o := stored.Metadata[engine.EditOfMetadata]; o != "" {
				orig = o
			}
			if orig != "msg_3" {
				return chat.Message{}, false
			}
			m := *stored
			m.Parts = []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: stored.Parts[0].ToolResult.ToolCallID,
				Content: fmt.Sprintf("[version %d of the cleared result]", version)}}}
			return m, true
		}
		var edits []string
		for version = 1; version <= 4; version++ {
			s, err := e.GetSession(ctx, tenant, v.ID)
			if err != nil {
				t.Fatal(err)
			}
			out, err := e.RecordClientEdits(ctx, tenant, v.ID, engine.ClientEditInput{Client: client, Max: 64, Expected: s.Version, Created: s.CreatedAt})
			if err != nil || out.Edited != 1 {
				t.Fatalf("version %d: %+v, %v", version, out, err)
			}
			edits = append(edits, out.Compaction.Items[0].NewID)
		}
		later := time.Now().Add(72 * time.Hour) // past the revert window
		if _, err := st.Purge(ctx, later, later); err != nil {
			t.Fatal(err)
		}
		for i, id := range edits {
			got, err := st.MessagesByID(ctx, tenant, v.ID, []string{id})
			kept := err == nil && len(got) == 1
			if last := i == len(edits)-1; kept != last {
				t.Errorf("after retention, version %d (%s) kept: %v (err %v); want only the active view's version kept", i+1, id, kept, err)
			}
		}
		x, err := e.ExpandMessage(ctx, tenant, v.ID, edits[len(edits)-1], "")
		if err != nil || len(x.Originals) != 1 || x.Originals[0].ID != "msg_3" || resultText(&x.Originals[0]) == "" {
			t.Errorf("expanding the active version after retention: %+v, %v; want the original msg_3", x.Originals, err)
		}
	})
}

// TestClientEditsWithinTheTenantsLogQuota: a client's version of a message
// is stored as a message of its own, so it counts against
// CONTEXTD_MAX_LOG_BYTES_PER_TENANT like an append: an edit that would
// take the tenant past it is refused (ResourceExhausted) and writes
// nothing. Before, edits were stored past the quota (a request that
// records 64 edits and then fails stores them without any upstream call,
// as often as the client likes).
func TestClientEditsWithinTheTenantsLogQuota(t *testing.T) {
	models, encodings := testModels(t)
	backendStores(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		off := false
		v := agentSession(t, engine.New(encodings, models, st), compaction.Overrides{AutoCompact: &off}, 4)
		var used int64
		if err := st.InTx(ctx, func(ctx context.Context, tx store.Tx) (err error) {
			used, err = tx.LogBytes(ctx, tenant)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		e := engine.New(encodings, models, st, engine.WithLimits(engine.Limits{MaxLogBytesPerTenant: used + 200}))
		longer := func(stored *chat.Message) (chat.Message, bool) {
			if stored.Role != chat.RoleTool || stored.Metadata[engine.EditOfMetadata] != "" {
				return chat.Message{}, false
			}
			m := *stored
			m.Parts = []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: stored.Parts[0].ToolResult.ToolCallID,
				Content: resultText(stored) + strings.Repeat(" and more", 100)}}}
			return m, true
		}
		s, err := e.GetSession(ctx, tenant, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		out, err := e.RecordClientEdits(ctx, tenant, v.ID, engine.ClientEditInput{Client: longer, Max: 64, Expected: s.Version, Created: s.CreatedAt})
		if !errors.Is(err, engine.ErrResourceExhausted) {
			t.Errorf("edits past the tenant's log quota: %+v, %v; want ResourceExhausted", out, err)
		}
		after, err := e.GetSession(ctx, tenant, v.ID)
		if err != nil || after.Version != s.Version || after.ActiveTokens != s.ActiveTokens {
			t.Errorf("a refused edit wrote: version %d → %d, active tokens %d → %d (%v)", s.Version, after.Version, s.ActiveTokens, after.ActiveTokens, err)
		}
	})
}
