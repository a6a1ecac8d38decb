package sqlite

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/store"
)

// waitCommitted waits until n groups committed since base (their syncs
// may be pending).
func waitCommitted(t *testing.T, s *Store, base, n int64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if s.syncs.committed.Load()-base >= n {
			return
		}
	}
	t.Fatalf("%d groups never committed", n)
}

// TestSyncRunsAfterTheWriteTurn: while a durable group's WAL sync is
// pending (the test holds the syncs' order, as a slow fsync would), the
// write turn is free: a resendable call of another session commits and
// is answered, and a second durable group commits too; once the sync may
// run, one fsync answers both durable groups (the second committed before
// it started). Fails with the sync inside the turn (answer() run before
// the turn is given up in InTx: the resendable call never commits while
// the sync waits).
func TestSyncRunsAfterTheWriteTurn(t *testing.T) {
	s := openTest(t)
	createSessions(t, s, 3)
	ctx := t.Context()
	s.syncs.mu.Lock() // the sync after the first durable commit waits
	locked := true
	defer func() {
		if locked {
			s.syncs.mu.Unlock()
		}
	}()
	base, syncs := s.syncs.committed.Load(), s.walSyncs.Load()
	durable := make(chan error, 2)
	go func() {
		durable <- s.InTx(ctx, func(ctx context.Context, tx store.Tx) error { return appendOne(ctx, tx, "s0", 1) })
	}()
	waitCommitted(t, s, base, 1)
	done := make(chan error, 1)
	go func() {
		done <- s.InTx(store.Resendable(ctx), func(ctx context.Context, tx store.Tx) error { return appendOne(ctx, tx, "s1", 1) })
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a resendable call waited for another group's sync of the WAL")
	}
	go func() {
		durable <- s.InTx(ctx, func(ctx context.Context, tx store.Tx) error { return appendOne(ctx, tx, "s2", 1) })
	}()
	waitCommitted(t, s, base, 3)
	select {
	case err := <-durable:
		t.Fatalf("a durable call answered (%v) before its sync", err)
	default:
	}
	s.syncs.mu.Unlock()
	locked = false
	for range 2 {
		if err := <-durable; err != nil {
			t.Fatal(err)
		}
	}
	if n := s.walSyncs.Load() - syncs; n != 1 {
		t.Fatalf("two durable groups committed before one sync: %d syncs, want one", n)
	}
}

// TestCommitBeforeAFailedSyncIsNotDurable: a durable group commits while
// the sync is held; meanwhile another sync fails (as one of an earlier
// group may, after this commit); this group's own sync, after it, would
// succeed without the pages the failed one may have dropped before its
// frames, so the group is answered store.ErrUnavailable (committed, not
// known on disk), not nil. Fails without the check of writable in
// syncThrough (answered nil).
func TestCommitBeforeAFailedSyncIsNotDurable(t *testing.T) {
	s := openTest(t)
	createSessions(t, s, 1)
	ctx := t.Context()
	s.syncs.mu.Lock()
	base := s.syncs.committed.Load()
	answered := make(chan error, 1)
	go func() {
		answered <- s.InTx(ctx, func(ctx context.Context, tx store.Tx) error { return appendOne(ctx, tx, "s0", 1) })
	}()
	waitCommitted(t, s, base, 1)
	failed := errors.New("fsync: input/output error")
	s.syncFailed.Store(&failed)
	s.syncs.mu.Unlock()
	if err := <-answered; !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, errSyncFailed) {
		t.Fatalf("a commit whose sync comes after a failed one: %v, want store.ErrUnavailable (errSyncFailed)", err)
	}
}
