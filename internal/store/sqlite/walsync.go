package sqlite

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contextd/contextd/internal/store"
)

// syncAfterTurn makes a committed group durable unless every call
// of it is marked store.Resendable. The group committed on the pool of
// writes, at synchronous=NORMAL: in WAL mode its frames are in the WAL
// file but not yet on disk. An fsync of the WAL then is what
// synchronous=FULL does at the end of the commit (the kernel flushes the
// file's pages whichever descriptor asks): once it returns, this commit
// and every one before it survive the operating system's crash. A crash
// before it returns loses at most commits not yet answered, and the
// database is consistent either way (WAL at NORMAL). A checkpoint between
// the commit and the sync loses nothing: SQLite syncs the WAL before it
// copies it and the database file after, and resets or truncates the WAL
// (or removes it, when the last connection closes) only once all of it is
// in the synced database file; should the WAL be gone, the database file
// is synced instead. A new WAL's directory entry is synced by SQLite when
// it writes the WAL's header (the header's sync, which NORMAL keeps).
//
// Unlike FULL, the commit is visible to every other connection from the
// commit on, before this sync: a read in that window may see a write that
// an operating system's crash then loses (its caller was never answered).
//
// A failed sync leaves the group committed and visible but not known to be
// on disk (at FULL SQLite's own failed sync left the commit unseen): its
// callers get store.ErrUnavailable, whose outcome is unknown, as for a
// PostgreSQL connection cut during the commit (docs/api.md: a retry with
// the same idempotency key is answered from the first). A failed fsync
// may have dropped the file's unwritten pages (Linux marks them clean), so
// that a later sync succeeds without them: from then on the store refuses
// every write (begin, lockWriter: errSyncFailed) until contextd restarts and
// SQLite recovers from what is on disk, as PostgreSQL panics
// (data_sync_retry=off). A file that could not be opened (too many open
// files) lost nothing: the next durable group's sync covers this one.
//
// The sync runs after the group gave up the write turn (syncAfterTurn):
// the next group commits while it runs, and one sync covers every commit
// made before it started (syncThrough), so that the write turn holds no
// fsync and concurrent durable groups share theirs. The order of syncs
// still decides: they run one at a time, and once one failed no later one
// answers a commit as durable (a commit it would cover may follow pages the
// failed one dropped): such a commit is answered store.ErrUnavailable, as
// one whose own sync failed.
func (s *Store) syncAfterTurn(group []*txCall) (answer func()) {
	s.committed()
	seq := s.syncs.committed.Add(1)
	return func() {
		var err error
		if !resendable(group) {
			err = s.syncThrough(seq)
		}
		for _, c := range group {
			c.done <- err
		}
	}
}

// walSyncs orders the WAL's syncs after commits (syncAfterTurn).
type walSyncs struct {
	// committed counts the groups committed, each counted once its
	// commit returned (its frames are in the WAL file).
	committed atomic.Int64
	// mu is held through a sync; synced is the count of commits the last
	// successful one covers.
	mu     sync.Mutex
	synced int64
}

// syncThrough returns once the commit numbered seq is on disk: covered by
// a sync that started after it, or by one it starts.
func (s *Store) syncThrough(seq int64) error {
	s.syncs.mu.Lock()
	defer s.syncs.mu.Unlock()
	if s.syncs.synced >= seq {
		return nil
	}
	if err := s.writable(); err != nil {
		return fmt.Errorf("%w: committed, but after a failed sync of the WAL: %w", store.ErrUnavailable, err)
	}
	through := s.syncs.committed.Load()
	if err := s.syncWAL(); err != nil {
		return fmt.Errorf("%w: committed, but the WAL's sync after the commit failed: %w", store.ErrUnavailable, err)
	}
	s.syncs.synced = through
	return nil
}

// syncsDone waits for the sync running, if any: a write outside group
// commit (lockWriter), at synchronous=FULL, must not be acknowledged by
// its own sync after one that failed.
func (s *Store) syncsDone() {
	s.syncs.mu.Lock()
	defer s.syncs.mu.Unlock()
}

// errSyncFailed is what every group is answered once a sync of the WAL
// failed (syncUnlessResendable): an Internal error, since retrying does
// not help until contextd restarts.
var errSyncFailed = errors.New("the store stopped writing after a failed sync of its WAL; restart contextd")

// syncWAL fsyncs the WAL file (or the database file when there is none).
func (s *Store) syncWAL() error {
	defer s.clock.synced(time.Now())
	f, err := os.Open(s.wal)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = os.Open(s.dbFile)
	}
	if err != nil {
		return err
	}
	err = f.Sync()
	if err != nil {
		s.syncFailed.CompareAndSwap(nil, &err)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		s.walSyncs.Add(1)
	}
	return err
}

// writable is begin's check that no sync of the WAL failed.
func (s *Store) writable() error {
	if p := s.syncFailed.Load(); p != nil {
		return fmt.Errorf("%w: %w", errSyncFailed, *p)
	}
	return nil
}
