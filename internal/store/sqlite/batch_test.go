package sqlite_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/sqlite"
)

// BenchmarkAppendToolCalls writes what an append of 10 assistant messages
// × 256 tool calls stores (the messages, an interrupted result for each
// call, their view entries and the tool-call rows) in one transaction: how
// long it holds SQLite's one writer.
func BenchmarkAppendToolCalls(b *testing.B) {
	s, err := sqlite.Open(b.Context(), b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	now := time.Unix(1_700_000_000, 0).UTC()
	for i := 0; b.Loop(); i++ {
		id := fmt.Sprint("s", i)
		err := s.InTx(b.Context(), func(ctx context.Context, tx store.Tx) error {
			if err := tx.InsertSession(ctx, &store.Session{Tenant: "t", ID: id, Model: "gpt-4o", Version: 1, CreatedAt: now, UpdatedAt: now}); err != nil {
				return err
			}
			var msgs []chat.Message
			var entries []store.ViewEntry
			var calls []store.ToolCall
			add := func(m chat.Message) {
				pos := int64(len(msgs) + 1)
				m.ID, m.Position, m.Kind, m.CreatedAt, m.Tokens = fmt.Sprint("msg_", pos), pos, chat.KindNormal, now, 10
				msgs = append(msgs, m)
				entries = append(entries, store.ViewEntry{Ord: pos, MessageID: m.ID})
			}
			for j := range 10 {
				m := chat.Message{Role: chat.RoleAssistant}
				for k := range 256 {
					m.Parts = append(m.Parts, chat.Part{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: fmt.Sprint("c", j, "_", k), Name: "read", Arguments: `{"path":"a.go"}`}})
				}
				add(m)
				for k := range 256 {
					add(chat.Message{Role: chat.RoleTool, Metadata: map[string]string{"contextd.interrupted": "true"}, Parts: []chat.Part{{Type: chat.PartToolResult,
						ToolResult: &chat.ToolResult{ToolCallID: fmt.Sprint("c", j, "_", k), Content: "[interrupted]", IsError: true}}}})
					calls = append(calls, store.ToolCall{CallID: fmt.Sprint("c", j, "_", k), Position: int64(len(msgs) - k - 1), ResultPosition: int64(len(msgs))})
				}
			}
			if err := tx.InsertMessages(ctx, "t", id, msgs); err != nil {
				return err
			}
			if err := tx.AppendView(ctx, "t", id, entries); err != nil {
				return err
			}
			return tx.PutToolCalls(ctx, "t", id, calls)
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
