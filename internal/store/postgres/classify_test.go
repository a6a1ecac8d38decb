package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/postgres"
)

// TestUnavailableClassification: a database that cannot be reached is
// told by SQLSTATE class (08 connection exception, 57P01-57P03 shutdown,
// 53300 too many connections) and by the connection's own errors, never
// by text; other PostgreSQL errors and a caller that gave up (its context
// done, which pgconn calls safe to retry) are not; the mark keeps the
// original error for errors.Is and errors.As.
func TestUnavailableClassification(t *testing.T) {
	conn, err := pgconn.Connect(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	done, cancel := context.WithCancel(t.Context())
	cancel()
	_, gaveUp := conn.Exec(done, "SELECT 1").ReadAll()
	if gaveUp == nil || !pgconn.SafeToRetry(gaveUp) {
		t.Fatalf("a query on a done context: %v (safe to retry %v), want an error pgconn calls safe to retry", gaveUp, pgconn.SafeToRetry(gaveUp))
	}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "08006"}, true},
		{&pgconn.PgError{Code: "57P01"}, true},
		{&pgconn.PgError{Code: "57P03"}, true},
		{&pgconn.PgError{Code: "53300"}, true},
		{fmt.Errorf("read: %w", refused), true},
		{&pgconn.PgError{Code: "23505"}, false},
		{&pgconn.PgError{Code: "40001"}, false},
		{&pgconn.PgError{Code: "57014"}, false}, // statement timeout or cancel
		{pgx.ErrNoRows, false},
		{context.Canceled, false},
		{fmt.Errorf("scan: %w", context.DeadlineExceeded), false},
		{gaveUp, false},
	} {
		err := c.err
		postgres.MarkUnavailable(&err)
		if got := errors.Is(err, store.ErrUnavailable); got != c.want {
			t.Errorf("%v: unavailable %v, want %v", c.err, got, c.want)
		}
		if !errors.Is(err, c.err) {
			t.Errorf("%v: the marked error %v no longer is the original", c.err, err)
		}
	}
	var pgErr *pgconn.PgError
	err = &pgconn.PgError{Code: "57P01"}
	postgres.MarkUnavailable(&err)
	if !errors.As(err, &pgErr) || pgErr.Code != "57P01" {
		t.Errorf("errors.As to *pgconn.PgError through the mark: %v", err)
	}
}
