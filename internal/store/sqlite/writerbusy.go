package sqlite

import (
	"sync/atomic"
	"time"
)

// The writer's busy time. Every write of the store goes through one write
// turn (groupcommit.go): whatever runs while a group holds it — the
// calls' functions, SQLite's own work on the rows, the commit — every
// other writer waits for, whatever the cores. Retention's deletes hold the
// same turn (lockWriter, purge.go) and are counted with the groups'. What an operator sees of it
// is its share of the wall time (contextd_sqlite_writer_busy_seconds_total,
// docs/operations.md): near 1, the store's writes are the replica's limit,
// and more concurrent requests only queue. The turn's time includes the
// WAL's sync of a durable group (walsync.go), which is also counted on its
// own. The sync stays inside the turn on purpose: run after it, the next
// group began at once with fewer calls, so there were more commits, each
// writing its own WAL frames, and more syncs; at 16 conversations through
// the gateway that cost more CPU per request than the turn it freed
// (docs/performance.md, "The single writer at 16 conversations").
type writerClock struct {
	busy, syncing atomic.Int64 // nanoseconds
}

// WriterBusy returns the wall time the write turn has been held (by the
// groups and by retention), and the time spent in the WAL's syncs after
// the groups' commits, since the store was opened.
func (s *Store) WriterBusy() (turn, sync time.Duration) {
	return time.Duration(s.clock.busy.Load()), time.Duration(s.clock.syncing.Load())
}

// held adds the time since start to the write turn's.
func (c *writerClock) held(start time.Time) { c.busy.Add(int64(time.Since(start))) }

// synced adds the time since start to the syncs'.
func (c *writerClock) synced(start time.Time) { c.syncing.Add(int64(time.Since(start))) }
