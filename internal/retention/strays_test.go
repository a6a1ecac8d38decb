package retention_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/retention"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/sqlite"
)

// TestStraysMemoryIsNotTheirIDs: what Strays remembers of a stray
// generation between passes does not grow with its session's id, which no
// limit bounds but the request's size: 200 sessions of 16 kB ids, each
// with a generation staged, leave it holding well under their 3.2 MB.
// Before, it kept each generation's tenant and session id (up to 10,000
// of them).
func TestStraysMemoryIsNotTheirIDs(t *testing.T) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const sessions, idBytes = 200, 16 << 10
	for i := range sessions {
		id := fmt.Sprintf("s%03d-%s", i, strings.Repeat("x", idBytes))
		if err := st.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
			if err := tx.InsertSession(ctx, &store.Session{Tenant: "t", ID: id, Model: "gpt-4o", Version: 1, CreatedAt: at, UpdatedAt: at}); err != nil {
				return err
			}
			m := chat.Message{ID: "m1", Position: 1, Role: chat.RoleUser, Kind: chat.KindNormal, Tokens: 1, CreatedAt: at,
				Parts: []chat.Part{{Type: chat.PartText, Text: "hi"}}}
			if err := tx.InsertMessages(ctx, "t", id, []chat.Message{m}); err != nil {
				return err
			}
			if err := tx.AppendView(ctx, "t", id, store.Entries([]string{"m1"}, 0)); err != nil {
				return err
			}
			return tx.StageView(ctx, "t", id, store.NewViewGen(), store.Entries([]string{"m1"}, 0))
		}); err != nil {
			t.Fatal(err)
		}
	}
	x := &retention.Strays{Age: time.Minute}
	var before, after runtime.MemStats
	heap := func(m *runtime.MemStats) {
		for range 3 { // finalizers run, and what they free goes
			runtime.GC()
		}
		runtime.ReadMemStats(m)
	}
	heap(&before)
	if gens, rows, err := x.Sweep(ctx, st, at); err != nil || gens != 0 || rows != 0 {
		t.Fatalf("a first look: %d generations, %d rows, %v; want nothing yet", gens, rows, err)
	}
	heap(&after)
	held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("Strays holds %d bytes for %d generations of %d-byte ids", held, sessions, idBytes)
	if held > sessions*idBytes/4 {
		t.Errorf("Strays holds %d bytes for %d generations; want well under their ids' %d", held, sessions, sessions*idBytes)
	}
	// It remembered them all the same: an age later, the pass deletes them.
	if gens, rows, err := x.Sweep(ctx, st, at.Add(time.Hour)); err != nil || gens != sessions || rows != sessions {
		t.Fatalf("a pass an age later: %d generations, %d rows, %v; want %d of each", gens, rows, err, sessions)
	}
}
