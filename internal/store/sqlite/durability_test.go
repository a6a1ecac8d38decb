package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"

	"github.com/contextd/contextd/internal/store"
)

// syncLevel reads the synchronous level the transaction commits with (1
// NORMAL, 2 FULL).
func syncLevel(ctx context.Context, tx store.Tx) (int, error) {
	var level int
	err := tx.(*txn).tx.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&level)
	return level, err
}

// TestDurableGroupsSyncTheWAL: every group commits on the pool of writes at
// synchronous=NORMAL (no fsync in WAL mode); one whose calls are all marked
// store.Resendable answers without a sync, one with any call that is not
// (an API call, the gateway's recording made Durable) answers once the
// WAL was synced after its commit, one sync for the whole group. Fails
// without the sync of walsync.go (no sync counted for a durable call).
func TestDurableGroupsSyncTheWAL(t *testing.T) {
	s := openTest(t)
	createSessions(t, s, 4)
	// syncs runs one call and answers its synchronous level and the WAL
	// syncs it made.
	syncs := func(ctx context.Context) (level int, n int64) {
		t.Helper()
		before := s.walSyncs.Load()
		if err := s.InTx(ctx, func(ctx context.Context, tx store.Tx) (err error) {
			level, err = syncLevel(ctx, tx)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return level, s.walSyncs.Load() - before
	}
	ctx := t.Context()
	if level, n := syncs(store.Resendable(ctx)); level != 1 || n != 0 {
		t.Fatalf("a resendable transaction: synchronous=%d and %d syncs, want 1 (NORMAL) and none", level, n)
	}
	// The gateway's recording: a resendable request's write made Durable.
	if level, n := syncs(store.Durable(store.Resendable(ctx))); level != 1 || n != 1 {
		t.Fatalf("a durable write of a resendable request: synchronous=%d and %d syncs, want 1 (NORMAL) and one", level, n)
	}
	if _, n := syncs(ctx); n != 1 {
		t.Fatalf("an API call: %d syncs, want one", n)
	}

	// A group of a resendable call and a durable one syncs once.
	release, started := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() { // holds the write turn while the others queue
		first <- s.InTx(store.Resendable(ctx), func(ctx context.Context, tx store.Tx) error { close(started); <-release; return nil })
	}()
	<-started
	before := s.walSyncs.Load()
	var wg sync.WaitGroup
	for _, c := range []context.Context{store.Resendable(ctx), ctx} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.InTx(c, func(ctx context.Context, tx store.Tx) error { return nil }); err != nil {
				t.Error(err)
			}
		}()
	}
	waitQueued(t, s, 2)
	close(release)
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if n := s.walSyncs.Load() - before; n != 1 {
		t.Fatalf("a group with a durable call: %d syncs, want one", n)
	}
}

// TestResendableRestoresFullOnFailure: a resendable transaction whose
// function fails, panics, or whose caller is gone when its turn comes
// leaves every connection of the pool at synchronous=FULL for the API
// calls after it.
func TestResendableRestoresFullOnFailure(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	gone, cancel := context.WithCancel(store.Resendable(ctx))
	cancel()
	calls := []struct {
		ctx context.Context
		fn  func(context.Context, store.Tx) error
	}{
		{store.Resendable(ctx), func(context.Context, store.Tx) error { return errors.New("refused") }},
		{store.Resendable(ctx), func(context.Context, store.Tx) error { panic("broken") }},
		{gone, func(context.Context, store.Tx) error { return nil }},
	}
	for i, c := range calls {
		if err := s.InTx(c.ctx, c.fn); err == nil {
			t.Fatalf("call %d: no error", i)
		}
	}
	// Hold every open connection at once, so each is checked.
	n := max(s.db.Stats().OpenConnections, 1)
	conns := make([]*sql.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range n {
		c, err := s.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		var level int
		if err := c.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&level); err != nil {
			t.Fatal(err)
		}
		if level != 2 {
			t.Fatalf("a connection after failed resendable calls: synchronous=%d, want 2 (FULL)", level)
		}
	}
}
