package sqlite

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// syncUnlessResendable makes a committed group durable unless every call
// of it is marked store.Resendable. The group committed on the pool of
// writes, at synchronous=NORMAL: in WAL mode its frames are in the WAL
// file but not yet on disk. An fsync of the WAL then is what
// synchronous=FULL does at the end of the commit (the kernel flushes the
// file's pages whichever descriptor asks): once it returns, this commit
// and every one before it survive the operating system's crash. A crash
// before it returns loses at most commits not yet answered, and the
// database is consistent either way (WAL at NORMAL). The WAL file exists
// while any connection is open; should it be gone (every connection
// closed, so SQLite checkpointed it into the database file and removed
// it), the database file is synced instead.
//
// A failed sync is the calls' error: their commit is visible but not
// known to be on disk, as when SQLite's own sync fails at FULL.
func (s *Store) syncUnlessResendable(group []*txCall) error {
	if resendable(group) {
		return nil
	}
	if err := s.syncWAL(); err != nil {
		return fmt.Errorf("commit: syncing the WAL: %w", err)
	}
	return nil
}

// syncWAL fsyncs the WAL file (or the database file when there is none).
func (s *Store) syncWAL() error {
	f, err := os.Open(s.wal)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = os.Open(s.dbFile)
	}
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		s.walSyncs.Add(1)
	}
	return err
}
