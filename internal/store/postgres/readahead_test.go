package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/postgres"
)

// TestReadAheadFailureIsNotNotFound: a read sent ahead with the session's
// lock (store.ReadAhead) that fails — here the hints row's, waiting past
// lock_timeout on a table another transaction holds — fails GetSession
// with its own error even when the session is not there: the transaction
// is aborted on the server, so an ErrNotFound would send a caller that
// goes on (creates the session, reads something else) into "current
// transaction is aborted" instead of the cause. (GetCalibration and a
// pipelined QueryRow answer a missing row's read the same way.)
func TestReadAheadFailureIsNotNotFound(t *testing.T) {
	url := pgtest.URL(t)
	// One connection, whose statements the first transaction prepares
	// before the table is held, with a lock_timeout.
	const params = "pool_max_conns=1 lock_timeout=200ms"
	timed := url + " " + params
	if strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://") {
		timed = url + map[bool]string{false: "?", true: "&"}[strings.Contains(url, "?")] + strings.ReplaceAll(params, " ", "&")
	}
	holder, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(context.Background())
	missing := func(ctx context.Context, tx store.Tx) error {
		_, err := tx.GetSession(ctx, "t", "gone")
		return err
	}
	for _, pipelined := range []bool{false, true} {
		s, err := postgres.Open(t.Context(), timed)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ctx := store.WithReadAhead(t.Context(), store.ReadAhead{OpenToolCalls: true, PreparedView: true})
		if pipelined {
			ctx = store.Pipelined(ctx)
		}
		if err := s.InTx(ctx, missing); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("pipelined %v: a missing session: %v, want ErrNotFound", pipelined, err)
		}
		if _, err := holder.Exec(t.Context(), "BEGIN; LOCK TABLE prepared_views IN ACCESS EXCLUSIVE MODE"); err != nil {
			t.Fatal(err)
		}
		err = s.InTx(ctx, missing)
		var pgErr *pgconn.PgError
		if errors.Is(err, store.ErrNotFound) || !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
			t.Errorf("pipelined %v: a missing session whose read ahead failed: %v, want the read's lock_not_available", pipelined, err)
		}
		if _, err := holder.Exec(t.Context(), "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
	}
}
