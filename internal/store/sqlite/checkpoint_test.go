package sqlite

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/store"
)

// TestCheckpointsOffTheCommits: the store's checkpointer keeps the WAL
// small while commits come, although no commit checkpoints before the
// backstop (walBackstopPages, 64 MB): 3,000 resendable appends, with a
// pause after every 500, leave a WAL of about 9 MB (what 500 appends
// write: the WAL starts over once a checkpoint caught up); without the
// checkpointer, 52 MB.
func TestCheckpointsOffTheCommits(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	createSessions(t, s, 1)
	ctx := store.Resendable(t.Context())
	const appends = 3000
	for i := range int64(appends) {
		if err := s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
			return appendOne(ctx, tx, "s0", i+1)
		}); err != nil {
			t.Fatal(err)
		}
		if i%500 == 0 {
			time.Sleep(2 * checkpointEvery) // commits spread over time, as requests come
		}
	}
	fi, err := os.Stat(filepath.Join(dir, FileName+"-wal"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("WAL %d KB after %d appends", fi.Size()>>10, appends)
	if fi.Size() > 20<<20 {
		t.Fatalf("the WAL holds %d KB after %d appends: not checkpointed while they came", fi.Size()>>10, appends)
	}
}

// TestCloseStopsTheCheckpointer: Close ends the checkpointer, even with a
// checkpoint pending after a commit, and does not wait for it; a commit's
// wake-up after Close blocks nothing, and a second Close answers.
func TestCloseStopsTheCheckpointer(t *testing.T) {
	s, err := Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	createSessions(t, s, 1)
	if err := s.InTx(t.Context(), func(ctx context.Context, tx store.Tx) error { return appendOne(ctx, tx, "s0", 1) }); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return: the checkpointer goes on")
	}
	select {
	case <-s.stopped:
	default:
		t.Fatal("the checkpointer still runs after Close")
	}
	s.committed()
	s.committed()
	if err := s.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
}

// TestWALShrinksAfterAHeldSnapshot: a reader that holds its snapshot
// through many commits keeps the checkpointer from resetting the WAL, so
// it grows past walKeepBytes; once the reader ends, the WAL is cut back to
// walKeepBytes (journal_size_limit) at its next reset instead of keeping
// its largest size on disk. Without the pragma it stays at its peak.
func TestWALShrinksAfterAHeldSnapshot(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	createSessions(t, s, 1)
	reader, err := s.db.BeginTx(t.Context(), &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := reader.QueryRow(`SELECT count(*) FROM sessions`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	wal := filepath.Join(dir, FileName+"-wal")
	size := func() int64 {
		fi, err := os.Stat(wal)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	ctx := store.Resendable(t.Context())
	pos := int64(0)
	appendNext := func() {
		pos++
		if err := s.InTx(ctx, func(ctx context.Context, tx store.Tx) error { return appendOne(ctx, tx, "s0", pos) }); err != nil {
			t.Fatal(err)
		}
	}
	for size() < 2*walKeepBytes {
		appendNext()
	}
	peak := size()
	if err := reader.Rollback(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for size() > walKeepBytes && time.Now().Before(deadline) {
		appendNext() // a write after a complete checkpoint resets the WAL
		time.Sleep(checkpointEvery)
	}
	if got := size(); got > walKeepBytes {
		t.Fatalf("the WAL is %d KB after the reader ended (peak %d KB): want it cut back to %d KB", got>>10, peak>>10, walKeepBytes>>10)
	}
}
