package sqlite

import (
	"context"
	"time"
)

// Checkpoints off the request path. SQLite's default copies the WAL back
// into the database file (a checkpoint, with an fsync of both files) in
// the commit that takes the WAL past 1,000 pages, so every few hundred
// gateway requests one of them paid for everyone's pages and two fsyncs
// (10 % of the CPU of BenchmarkAppendOneMessage was that checkpoint,
// inside its commits). Instead the store's own goroutine runs a PASSIVE
// checkpoint (it waits for no reader and blocks no writer) checkpointEvery
// after a commit; the commit's own checkpoint is kept only as a backstop,
// at walBackstopPages, for a checkpointer that cannot keep up. A WAL
// that grew past that (a reader held its snapshot through many commits)
// is cut back to walKeepBytes when it is next reset, instead of keeping
// its largest size on disk for good.
const (
	checkpointEvery  = 100 * time.Millisecond
	walBackstopPages = 16000            // 64 MB of 4 KiB pages
	walKeepBytes     = 16 * 1024 * 1024 // journal_size_limit
)

// checkpointer runs until ctx ends: after a commit (wrote), it waits
// checkpointEvery and checkpoints what the WAL holds then.
func (s *Store) checkpointer(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wrote:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(checkpointEvery):
		}
		// A failure (the database busy with another process's checkpoint)
		// is retried after the next commit; the backstop bounds the WAL.
		_, _ = s.db.ExecContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`)
	}
}

// committed tells the checkpointer that the WAL grew.
func (s *Store) committed() {
	select {
	case s.wrote <- struct{}{}:
	default: // one is pending already
	}
}
