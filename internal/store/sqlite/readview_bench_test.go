package sqlite_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/sqlite"
)

// BenchmarkReadView reads a session's active view of 200 messages of 2 KB
// (ActiveMessages, as a PrepareContext without a cached view does): the
// read every session makes, which a fork's shared rows must not slow.
func BenchmarkReadView(b *testing.B) {
	ctx := b.Context()
	s, err := sqlite.Open(ctx, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	at := time.Unix(1_700_000_000, 0).UTC()
	msgs := make([]chat.Message, 200)
	for i := range msgs {
		msgs[i] = chat.Message{ID: fmt.Sprintf("msg_%d", i+1), Position: int64(i + 1), Role: chat.RoleUser, Kind: chat.KindNormal,
			Tokens: 500, CreatedAt: at, Parts: []chat.Part{{Type: chat.PartText, Text: fmt.Sprintf("%d %s", i, strings.Repeat("x", 2000))}}}
	}
	err = s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		if err := tx.InsertSession(ctx, &store.Session{Tenant: "t", ID: "s", Model: "gpt-4o", Version: 1, CreatedAt: at, UpdatedAt: at}); err != nil {
			return err
		}
		if err := tx.InsertMessages(ctx, "t", "s", msgs); err != nil {
			return err
		}
		return tx.AppendView(ctx, "t", "s", store.Entries(func() []string {
			ids := make([]string, len(msgs))
			for i := range msgs {
				ids[i] = msgs[i].ID
			}
			return ids
		}(), 0))
	})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		got, _, err := s.ActiveMessages(ctx, "t", "s", 0, 1000)
		if err != nil || len(got) != len(msgs) {
			b.Fatalf("%d messages, %v", len(got), err)
		}
	}
}
