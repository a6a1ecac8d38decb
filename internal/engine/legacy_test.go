package engine_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

// writeLegacyInterrupted writes straight into the store what a session
// held before interrupted calls were recorded: an assistant message with a
// tool call that never got a result, followed by a user message; with late,
// also the interrupted result an append of that time recorded after the
// user message (not right after the call, where providers want it).
func writeLegacyInterrupted(t *testing.T, ctx context.Context, st store.Store, id, callID, text string, late bool) {
	t.Helper()
	err := st.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		s, err := tx.GetSession(ctx, tenant, id)
		if err != nil {
			return err
		}
		msgs := []chat.Message{callMsg(callID), userMsg(text)}
		call := store.ToolCall{CallID: callID, Position: s.LogCount + 1}
		if late {
			r := resultMsg(callID, "[interrupted]")
			r.Metadata = map[string]string{engine.InterruptedMetadata: "true"}
			msgs = append(msgs, r)
			call.ResultPosition = s.LogCount + 3
		}
		now := time.Now().UTC().Truncate(time.Microsecond)
		entries := make([]store.ViewEntry, len(msgs))
		for i := range msgs {
			pos := s.LogCount + int64(i) + 1
			msgs[i].Position, msgs[i].ID, msgs[i].Kind, msgs[i].CreatedAt = pos, "msg_"+strconv.FormatInt(pos, 10), chat.KindNormal, now
			msgs[i].Tokens = int64(len(text)/4 + 12)
			entries[i] = store.ViewEntry{Ord: s.ViewSeq + int64(i) + 1, MessageID: msgs[i].ID}
		}
		if err := tx.InsertMessages(ctx, tenant, id, msgs); err != nil {
			return err
		}
		if err := tx.AppendView(ctx, tenant, id, entries); err != nil {
			return err
		}
		if err := tx.PutToolCalls(ctx, tenant, id, []store.ToolCall{call}); err != nil {
			return err
		}
		n := int64(len(msgs))
		s.LogCount += n
		s.ViewSeq += n
		s.ActiveCount += n
		for _, m := range msgs {
			s.ActiveTokens += m.Tokens
		}
		s.Version++
		return tx.UpdateSession(ctx, &s)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestLegacyInterruptedCallIsRepaired: a session whose stored view holds an
// unanswered tool call followed by a user message (written before
// interrupted calls were recorded) is repaired by PrepareContext or Compact,
// whichever comes first: no Internal, the interrupted result sits right
// after the call, and the view passes a provider's pairing rules, also once
// compaction runs on it. Both backends.
func TestLegacyInterruptedCallIsRepaired(t *testing.T) {
	models, encodings := testModels(t)
	for _, first := range []string{"prepare", "compact", "append", "restart"} {
		t.Run(first, func(t *testing.T) {
			backendStores(t, func(t *testing.T, st store.Store) {
				ctx := t.Context()
				e := engine.New(encodings, models, st)
				v := agentSession(t, e, compaction.Overrides{WarningThreshold: ptr(0.3), CriticalThreshold: ptr(0.4), Target: ptr(0.2)}, 6)
				writeLegacyInterrupted(t, ctx, st, v.ID, "legacy_1", "stop, do something else", true)
				if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: []chat.Message{
					{Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText, Text: "ok"}}}}}); err != nil {
					t.Fatal(err)
				}
				writeLegacyInterrupted(t, ctx, st, v.ID, "legacy_2", strings.Repeat("now this instead ", 200), false)
				switch first {
				case "append":
					if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: []chat.Message{userMsg("and then")}}); err != nil {
						t.Fatalf("AppendMessages on a legacy view: %v", err)
					}
				case "restart": // a new process, nothing cached: PrepareContext without messages
					e = engine.New(encodings, models, st)
					if _, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{}); err != nil {
						t.Fatalf("PrepareContext on a legacy view: %v", err)
					}
				case "prepare":
					if _, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: []chat.Message{userMsg("go on")}}); err != nil {
						t.Fatalf("PrepareContext on a legacy view: %v", err)
					}
				case "compact":
					if _, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{Tier: compaction.TierPrune}); err != nil {
						t.Fatalf("Compact on a legacy view: %v", err)
					}
				}
				log, err := e.GetMessages(ctx, tenant, v.ID, engine.ViewLog, engine.Page{Size: 1000})
				if err != nil {
					t.Fatal(err)
				}
				for _, call := range []string{"legacy_1", "legacy_2"} {
					n := 0
					for _, m := range log.Messages {
						for _, p := range m.Parts {
							if p.Type == chat.PartToolResult && p.ToolResult.ToolCallID == call && m.Metadata[engine.InterruptedMetadata] == "true" {
								n++
							}
						}
					}
					if n != 1 {
						t.Errorf("%s: %d interrupted results in the log; want 1", call, n)
					}
				}
				for i := 0; i < 3; i++ {
					res, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: []chat.Message{userMsg(fmt.Sprintf("more %d %s", i, strings.Repeat("x ", 300)))}})
					if err != nil {
						t.Fatalf("PrepareContext %d: %v", i, err)
					}
					if err := compaction.ValidatePairs(res.Messages); err != nil {
						t.Fatalf("a view providers reject: %v", err)
					}
					for j, m := range res.Messages {
						for _, p := range m.Parts {
							if p.Type == chat.PartToolCall && strings.HasPrefix(p.ToolCall.ID, "legacy") &&
								(j+1 >= len(res.Messages) || res.Messages[j+1].Role != chat.RoleTool) {
								t.Errorf("call %s is not followed by its result", p.ToolCall.ID)
							}
						}
					}
				}
				if _, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{}); err != nil {
					t.Fatalf("Compact after the repair: %v", err)
				}
			})
		})
	}
}
