package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// logBytes reads a tenant's count in a transaction of its own.
func logBytes(t *testing.T, s store.Store, tenant string) int64 {
	t.Helper()
	var n int64
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		n, err = tx.LogBytes(ctx, tenant)
		return err
	})
	return n
}

// storedBytes sums the sizes of the sessions' stored rows (LogSizes: what
// the count must equal).
func storedBytes(t *testing.T, s store.Store, tenant string, sessions ...string) int64 {
	t.Helper()
	var n int64
	for _, id := range sessions {
		rows, err := s.LogSizes(t.Context(), tenant, id, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			n += r.Bytes
		}
	}
	return n
}

func sized(id string, pos int64, text string, at time.Time) chat.Message {
	return chat.Message{ID: id, Position: pos, Role: chat.RoleUser, Kind: chat.KindNormal, Tokens: 1, CreatedAt: at,
		Parts: []chat.Part{{Type: chat.PartText, Text: text}}, Metadata: map[string]string{"k": "vé"}}
}

// testLogBytes checks the tenant's log count: it follows every insert
// (and not one rolled back) and every delete, the cascade of a purged
// session's messages and retention's deletes included, per tenant; and it
// is exact under concurrent writers, each of which refuses its own insert
// when the count passes a cap (as the engine's quota does): the tenant ends
// with exactly as many inserts as fit.
func testLogBytes(t *testing.T, s store.Store) {
	if n := logBytes(t, s, "t1"); n != 0 {
		t.Fatalf("LogBytes of an empty store = %d", n)
	}
	for _, k := range [][2]string{{"t1", "a"}, {"t1", "b"}, {"t2", "a"}} {
		create(t, s, session(k[0], k[1], epoch))
	}
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		summary := sized("s1", 0, "a summary", epoch)
		summary.Kind, summary.Replaces = chat.KindSummary, []string{"m1", "m2"}
		if err := tx.InsertMessages(ctx, "t1", "a", []chat.Message{sized("m1", 1, "hello ✓", epoch), sized("m2", 2, strings.Repeat("x", 1000), epoch), summary}); err != nil {
			return err
		}
		if err := tx.AppendView(ctx, "t1", "a", []store.ViewEntry{{Ord: 1, MessageID: "s1"}}); err != nil {
			return err
		}
		if err := tx.InsertMessages(ctx, "t1", "b", []chat.Message{sized("m1", 1, "b", epoch)}); err != nil {
			return err
		}
		if err := tx.InsertMessages(ctx, "t2", "a", []chat.Message{sized("m1", 1, "other tenant", epoch)}); err != nil {
			return err
		}
		return tx.AppendView(ctx, "t2", "a", []store.ViewEntry{{Ord: 1, MessageID: "m1"}})
	})
	// The summary (position 0) is no log row for LogSizes: add its size.
	var summaryBytes int64
	if rows, err := s.ActiveSizes(t.Context(), "t1", "a", 0, 10); err != nil || len(rows) != 1 {
		t.Fatalf("ActiveSizes = %v, %v", rows, err)
	} else {
		summaryBytes = rows[0].Bytes
	}
	want := storedBytes(t, s, "t1", "a", "b") + summaryBytes
	if got := logBytes(t, s, "t1"); got != want || got < 1000 {
		t.Fatalf("LogBytes(t1) = %d; want %d, the stored rows' sizes", got, want)
	}
	if got, want := logBytes(t, s, "t2"), storedBytes(t, s, "t2", "a"); got != want {
		t.Fatalf("LogBytes(t2) = %d; want %d", got, want)
	}
	// A rolled-back insert counts nothing.
	boom := errors.New("boom")
	if err := inTx(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.InsertMessages(ctx, "t1", "b", []chat.Message{sized("m2", 2, "rolled back", epoch)}); err != nil {
			return err
		}
		if n, err := tx.LogBytes(ctx, "t1"); err != nil || n <= want {
			return fmt.Errorf("LogBytes inside the inserting transaction = %d, %v; want more than %d", n, err, want)
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if got := logBytes(t, s, "t1"); got != want {
		t.Fatalf("LogBytes(t1) after a rollback = %d; want %d", got, want)
	}
	// Retention: b's session is purged (its messages go by cascade), and
	// a's old m1 and m2 that nothing keeps any more go.
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteSession(ctx, "t1", "b") })
	now := epoch.Add(90 * 24 * time.Hour)
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		// Nothing can bring m1 and m2 back: s1 no longer replaces them.
		return tx.ReplaceView(ctx, "t1", "a", nil)
	})
	if _, err := s.Purge(t.Context(), now.Add(-time.Hour), now); err != nil {
		t.Fatal(err)
	}
	if got := logBytes(t, s, "t1"); got != 0 {
		t.Fatalf("LogBytes(t1) after everything was purged = %d; want 0", got)
	}
	if got, want := logBytes(t, s, "t2"), storedBytes(t, s, "t2", "a"); got != want || got == 0 {
		t.Fatalf("LogBytes(t2) after t1's purge = %d; want %d", got, want)
	}

	// Concurrent writers against a cap of 5 messages' worth.
	const writers, text = 12, "0123456789abcdef"
	for i := range writers {
		create(t, s, session("t3", fmt.Sprint("w", i), epoch))
	}
	one := func() int64 {
		mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
			return tx.InsertMessages(ctx, "t3", "w0", []chat.Message{sized("probe", 1, text, epoch)})
		})
		n := logBytes(t, s, "t3")
		mustTx(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteSession(ctx, "t3", "w0") })
		if _, err := s.Purge(t.Context(), now, now); err != nil {
			t.Fatal(err)
		}
		return n
	}()
	if n := logBytes(t, s, "t3"); n != 0 || one == 0 {
		t.Fatalf("probe: one message %d bytes, %d left after its purge", one, n)
	}
	quota := 5 * one
	errOver := errors.New("over quota")
	var wg sync.WaitGroup
	var mu sync.Mutex
	stored := 0
	for i := 1; i < writers; i++ {
		wg.Go(func() {
			err := s.InTx(context.Background(), func(ctx context.Context, tx store.Tx) error {
				if err := tx.InsertMessages(ctx, "t3", fmt.Sprint("w", i), []chat.Message{sized("probe", 1, text, epoch)}); err != nil {
					return err
				}
				time.Sleep(10 * time.Millisecond) // widens the window between the insert and the commit
				n, err := tx.LogBytes(ctx, "t3")
				if err != nil {
					return err
				}
				if n > quota {
					return errOver
				}
				return nil
			})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				stored++
			case !errors.Is(err, errOver):
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := logBytes(t, s, "t3"); stored != 5 || got != quota {
		t.Fatalf("%d concurrent writers against a quota of 5 messages stored %d (%d bytes; quota %d)", writers-1, stored, got, quota)
	}
}
