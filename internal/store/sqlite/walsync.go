package sqlite

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/contextd/contextd/internal/store"
)

// syncUnlessResendable makes a committed group durable unless every call
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
func (s *Store) syncUnlessResendable(group []*txCall) error {
	if resendable(group) {
		return nil
	}
	if err := s.syncWAL(); err != nil {
		return fmt.Errorf("%w: committed, but the WAL's sync after the commit failed: %w", store.ErrUnavailable, err)
	}
	return nil
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
