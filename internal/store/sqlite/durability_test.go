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

// TestResendableCommitsWithoutSync: a transaction whose calls are all
// marked store.Resendable commits with synchronous=NORMAL (no fsync in WAL
// mode); one with any call that is not commits FULL, and the connection a
// resendable transaction used is FULL again for the next caller.
func TestResendableCommitsWithoutSync(t *testing.T) {
	s := openTest(t)
	createSessions(t, s, 4)
	level := func(ctx context.Context) int {
		t.Helper()
		var got int
		if err := s.InTx(ctx, func(ctx context.Context, tx store.Tx) (err error) {
			got, err = syncLevel(ctx, tx)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	ctx := t.Context()
	if got := level(store.Resendable(ctx)); got != 1 {
		t.Fatalf("a resendable transaction commits with synchronous=%d, want 1 (NORMAL)", got)
	}
	// The gateway's recording: a resendable request's write made Durable.
	if got := level(store.Durable(store.Resendable(ctx))); got != 2 {
		t.Fatalf("a durable write of a resendable request commits with synchronous=%d, want 2 (FULL)", got)
	}
	for i := range 3 { // every idle connection is FULL again
		if got := level(ctx); got != 2 {
			t.Fatalf("call %d after it: synchronous=%d, want 2 (FULL)", i, got)
		}
	}

	// A group of a resendable call and a durable one syncs.
	release, started := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() { // holds the write turn while the others queue
		first <- s.InTx(ctx, func(ctx context.Context, tx store.Tx) error { close(started); <-release; return nil })
	}()
	<-started
	var wg sync.WaitGroup
	levels := make([]int, 2)
	for i, c := range []context.Context{store.Resendable(ctx), ctx} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = s.InTx(c, func(ctx context.Context, tx store.Tx) (err error) {
				levels[i], err = syncLevel(ctx, tx)
				return err
			})
		}()
	}
	waitQueued(t, s, 2)
	close(release)
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if levels[0] != 2 || levels[1] != 2 {
		t.Fatalf("a group with a durable call: synchronous %v, want FULL for both", levels)
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
