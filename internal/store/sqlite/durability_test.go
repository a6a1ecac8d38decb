package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

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

// TestFailedWALSyncStopsWrites: a durable group whose WAL could not be
// synced after its commit answers store.ErrUnavailable (committed, its
// durability unknown: docs/api.md) while what it wrote is stored; after a
// failed fsync (EINVAL: the path of the WAL made os.DevNull) every later
// group, resendable or not, is refused with errSyncFailed; a file that
// could not be opened (nothing lost) stops nothing. Fails without the
// check in begin (the write after the failed fsync commits) and with the
// sync's error not marked ErrUnavailable.
func TestFailedWALSyncStopsWrites(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	createSessions(t, s, 1)
	wal, dbFile := s.wal, s.dbFile
	appendAt := func(ctx context.Context, pos int64) error {
		return s.InTx(ctx, func(ctx context.Context, tx store.Tx) error { return appendOne(ctx, tx, "s0", pos) })
	}
	stored := func(pos int64) bool {
		t.Helper()
		var n int
		if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM messages WHERE id = ?`, fmt.Sprintf("s0-%d", pos)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}

	// Neither file can be opened: unknown outcome, the store goes on.
	gone := filepath.Join(t.TempDir(), "gone")
	s.wal, s.dbFile = gone+"-wal", gone
	if err := appendAt(ctx, 1); !errors.Is(err, store.ErrUnavailable) || errors.Is(err, errSyncFailed) {
		t.Fatalf("a commit whose WAL could not be opened: %v, want store.ErrUnavailable", err)
	}
	s.wal, s.dbFile = wal, dbFile
	if !stored(1) {
		t.Fatal("the commit whose sync failed is not stored")
	}
	if err := appendAt(ctx, 2); err != nil {
		t.Fatalf("a write after a WAL that could not be opened: %v", err)
	}

	// The fsync itself fails: unknown outcome, and every later group refused.
	s.wal = os.DevNull
	if err := appendAt(ctx, 3); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a commit whose fsync failed: %v, want store.ErrUnavailable", err)
	}
	s.wal = wal
	for i, c := range []context.Context{ctx, store.Resendable(ctx)} {
		if err := appendAt(c, int64(4+i)); !errors.Is(err, errSyncFailed) {
			t.Fatalf("write %d after a failed fsync: %v, want errSyncFailed", i, err)
		}
		if stored(int64(4 + i)) {
			t.Fatalf("write %d after a failed fsync is stored", i)
		}
	}
	// The writes outside group commit (retention's purge) too.
	if _, err := s.Purge(ctx, time.Now(), time.Now()); !errors.Is(err, errSyncFailed) {
		t.Fatalf("a purge after a failed fsync: %v, want errSyncFailed", err)
	}
}
