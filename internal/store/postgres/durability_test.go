package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/postgres"
)

// TestResendableCommitsAsynchronously: a transaction marked
// store.Resendable runs with synchronous_commit off (its commit does not
// wait for the WAL flush); others, on the same pool's connections before
// and after it, with the server's setting (on).
func TestResendableCommitsAsynchronously(t *testing.T) {
	url := pgtest.URL(t)
	// The test cluster runs with synchronous_commit off; this database's
	// sessions get it on, as a production server has it.
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	var db string
	if err := conn.QueryRow(t.Context(), "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), "ALTER DATABASE "+pgx.Identifier{db}.Sanitize()+" SET synchronous_commit = on"); err != nil {
		t.Fatal(err)
	}
	conn.Close(t.Context())
	s, err := postgres.Open(t.Context(), url)
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
