package storetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

func chainOf(n int, tag string) string {
	return fmt.Sprintf("%032x", fmt.Sprintf("%s%d", tag, n))[:32]
}

// historyMessages are n client messages of a history (positions from
// first), each carrying its chain, plus a placeholder carrying an
// original's metadata and a message without any (neither is indexed).
func historyMessages(tag string, first, n int) []chat.Message {
	var out []chat.Message
	for i := first; i < first+n; i++ {
		out = append(out, chat.Message{ID: fmt.Sprintf("%s-m%d", tag, i), Position: int64(i), Role: chat.RoleUser, Kind: chat.KindNormal,
			Parts: []chat.Part{{Type: chat.PartText, Text: "x"}}, Tokens: 1, CreatedAt: epoch,
			Metadata: map[string]string{store.HistoryMetadata: fmt.Sprintf("%d:%s", i, chainOf(i, "shared"))}})
	}
	return out
}

func testHistoryIndex(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, id := range []string{"a", "b"} {
		create(t, s, session("t", id, epoch))
	}
	create(t, s, session("other", "a", epoch))
	insertMessages(t, s, "t", "a", historyMessages("a", 1, 2))
	insertMessages(t, s, "t", "a", historyMessages("a", 3, 1))
	insertMessages(t, s, "t", "b", historyMessages("b", 1, 2))
	insertMessages(t, s, "other", "a", historyMessages("o", 1, 3))
	// A placeholder keeps its original's metadata and has no log position:
	// it is not the client's history.
	ph := historyMessages("a", 1, 1)
	ph[0].ID, ph[0].Position, ph[0].Kind = "a-ph", 0, chat.KindPlaceholder
	insertMessages(t, s, "t", "a", ph)

	find := func(chains ...string) []string {
		t.Helper()
		hits, err := s.FindHistory(ctx, "t", chains, 10)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, h := range hits {
			out = append(out, fmt.Sprintf("%s@%d/%v", h.SessionID, h.Length, h.Head))
		}
		slices.Sort(out)
		return out
	}
	if got, want := find(chainOf(2, "shared")), []string{"a@2/false", "b@2/true"}; !slices.Equal(got, want) {
		t.Errorf("chain 2: %v, want %v", got, want)
	}
	if got, want := find(chainOf(3, "shared"), chainOf(2, "shared")), []string{"a@2/false", "a@3/true", "b@2/true"}; !slices.Equal(got, want) {
		t.Errorf("chains 3 and 2: %v, want %v", got, want)
	}
	// Heads come first, the longest first.
	if hits, _ := s.FindHistory(ctx, "t", []string{chainOf(2, "shared"), chainOf(3, "shared")}, 1); len(hits) != 1 || hits[0].SessionID != "a" || hits[0].Length != 3 {
		t.Errorf("limit 1: %+v", hits)
	}
	if got := find(chainOf(9, "shared")); len(got) != 0 {
		t.Errorf("unknown chain: %v", got)
	}
	// A deleted session is not found; one made again under its id starts
	// with no history.
	create(t, s, session("t", "c", epoch))
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteSession(ctx, "t", "c") })
	checkHistoryRow(t, s, "c")
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteSession(ctx, "t", "b") })
	if got, want := find(chainOf(2, "shared")), []string{"a@2/false"}; !slices.Equal(got, want) {
		t.Errorf("after deleting b: %v, want %v", got, want)
	}
	create(t, s, session("t", "b", epoch))
	if got := find(chainOf(1, "shared")); strings.Contains(strings.Join(got, " "), "b@") {
		t.Errorf("the re-made session kept its predecessor's history: %v", got)
	}
	// A chain many sessions share reads at most limit of them, and the heads
	// of another chain (a's and p0's) still come first.
	for i := range 5 {
		id := fmt.Sprintf("p%d", i)
		create(t, s, session("t", id, epoch))
		insertMessages(t, s, "t", id, historyMessages(id, 1, 2))
	}
	insertMessages(t, s, "t", "p0", historyMessages("p0x", 3, 1))
	if hits, err := s.FindHistory(ctx, "t", []string{chainOf(1, "shared"), chainOf(3, "shared")}, 3); err != nil || len(hits) != 3 || !hits[1].Head || hits[1].Length != 3 || hits[2].Head || hits[2].Length != 1 {
		t.Errorf("a shared chain, limit 3 (heads a and p0 at 3, then one at 1): %+v, %v", hits, err)
	}
	// Tenants never see each other's.
	if hits, _ := s.FindHistory(ctx, "other", []string{chainOf(3, "shared")}, 10); len(hits) != 1 || hits[0].SessionID != "a" {
		t.Errorf("tenant other: %+v", hits)
	}
}

// BenchFindHistory: a request of a conversation whose opening N other
// sessions share (each went on its own way) looks its last chains up, the
// opening's among them. The work per lookup stays the same as N grows
// (each chain reads at most limit rows of the index); ns/op at N=200 and
// N=2000 side by side tell.
func BenchFindHistory(b *testing.B, newStore func(b *testing.B) store.Store) {
	for _, n := range []int{200, 2000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			s := newStore(b)
			ctx := b.Context()
			const batch = 200
			for start := 0; start < n; start += batch {
				err := s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
					for i := start; i < min(start+batch, n); i++ {
						id := fmt.Sprintf("s%d", i)
						if err := tx.InsertSession(ctx, session("t", id, epoch)); err != nil {
							return err
						}
						// The shared opening, then the session's own message.
						msgs := historyMessages(id, 1, 1)
						own := historyMessages(id, 2, 1)
						own[0].Metadata[store.HistoryMetadata] = fmt.Sprintf("2:%s", chainOf(i, "own"))
						if err := tx.InsertMessages(ctx, "t", id, append(msgs, own...)); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			chains := []string{chainOf(1, "shared"), chainOf(0, "new")}
			b.ResetTimer()
			for range b.N {
				hits, err := s.FindHistory(ctx, "t", chains, 64)
				if err != nil || len(hits) != 64 || hits[0].Head {
					b.Fatalf("%d hits, %v", len(hits), err)
				}
			}
		})
	}
}
