package postgres_test

import (
	"context"
	"testing"

	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/postgres"
)

// TestResendableCommitsAsynchronously: a transaction marked
// store.Resendable runs with synchronous_commit off (its commit does not
// wait for the WAL flush); others, on the same pool's connections before
// and after it, with the server's setting (on).
func TestResendableCommitsAsynchronously(t *testing.T) {
	s, err := postgres.Open(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	level := func(ctx context.Context) string {
		t.Helper()
		var got string
		if err := s.InTx(ctx, func(ctx context.Context, tx store.Tx) (err error) {
			got, err = postgres.SyncCommit(ctx, tx)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	ctx := t.Context()
	if got := level(ctx); got != "on" {
		t.Fatalf("an API transaction: synchronous_commit %q, want on", got)
	}
	if got := level(store.Resendable(ctx)); got != "off" {
		t.Fatalf("a resendable transaction: synchronous_commit %q, want off", got)
	}
	for i := range 6 { // SET LOCAL ends with its transaction, on every connection
		if got := level(ctx); got != "on" {
			t.Fatalf("transaction %d after it: synchronous_commit %q, want on", i, got)
		}
	}
}
