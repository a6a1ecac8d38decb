package sqlite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/store"
)

// BenchmarkFindHistoryOneChain is the gateway's usual history lookup: one
// chain (a request's new message) among 16 sessions of 100 messages
// (docs/performance.md: 36–40 µs a lookup with the limit bound as a
// parameter, which made SQLite prepare the statement again on every call;
// 10–12 µs with it written into the statement).
func BenchmarkFindHistoryOneChain(b *testing.B) {
	s, err := Open(b.Context(), b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	now := time.Unix(1_700_000_000, 0).UTC()
	for k := range 16 {
		id := fmt.Sprint("s", k)
		err = s.InTx(b.Context(), func(ctx context.Context, tx store.Tx) error {
			if err := tx.InsertSession(ctx, &store.Session{Tenant: "t", ID: id, Model: "gpt-4o", Version: 1, CreatedAt: now, UpdatedAt: now}); err != nil {
				return err
			}
			var es []store.HistoryEntry
			for i := range 100 {
				es = append(es, store.HistoryEntry{Length: int64(i + 1), Chain: fmt.Sprintf("%032x", k*1000+i)})
			}
			return tx.(*txn).indexHistory(ctx, "t", id, es)
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	i := 0
	for b.Loop() {
		i++
		hits, err := s.FindHistory(b.Context(), "t", []string{fmt.Sprintf("%032x", (i%16)*1000+i%100)}, 8)
		if err != nil || len(hits) != 1 {
			b.Fatal(err, hits)
		}
	}
}
