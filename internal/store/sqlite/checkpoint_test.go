package sqlite

import (
	"context"
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
