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
