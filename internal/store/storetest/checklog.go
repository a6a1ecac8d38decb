package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// testCheckLogBytes: CheckLogBytes after an insert counts it, passes at
// the quota and fails with the caller's error past it — pipelined or not,
// from the transaction however late the store sends it — and a refused
// transaction stores nothing.
func testCheckLogBytes(t *testing.T, s store.Store) {
	create(t, s, session("t", "s", epoch))
	over := errors.New("over the quota")
	for i, pipelined := range []bool{false, true} {
		ctx := t.Context()
		if pipelined {
			ctx = store.Pipelined(ctx)
		}
		before := logBytes(t, s, "t")
		pos := int64(i + 1)
		insert := func(ctx context.Context, tx store.Tx, id string, pos int64) error {
			return tx.InsertMessages(ctx, "t", "s", []chat.Message{sized(id, pos, "a message of some bytes", epoch)})
		}
		// Past the quota by the insert: refused, nothing stored. n is
		// the count with the insert (a message the size of the next one).
		var n int64
		err := s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
			if err := insert(ctx, tx, "no"+string(rune('a'+i)), pos); err != nil {
				return err
			}
			var err error
			if n, err = tx.LogBytes(ctx, "t"); err != nil {
				return err
			}
			return tx.CheckLogBytes(ctx, "t", n-1, over)
		})
		if !errors.Is(err, over) {
			t.Errorf("pipelined %v: an insert past the quota: %v, want the caller's error", pipelined, err)
		}
		if got := logBytes(t, s, "t"); got != before {
			t.Errorf("pipelined %v: a refused insert left the count at %d, want %d", pipelined, got, before)
		}
		// At the quota exactly: stored.
		err = s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
			if err := insert(ctx, tx, "ok"+string(rune('a'+i)), pos); err != nil {
				return err
			}
			return tx.CheckLogBytes(ctx, "t", n, over)
		})
		if err != nil {
			t.Errorf("pipelined %v: an insert at the quota: %v", pipelined, err)
		}
		if got := logBytes(t, s, "t"); got != n {
			t.Errorf("pipelined %v: the count after an insert at the quota is %d, want %d", pipelined, got, n)
		}
	}
}
