package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/contextd/contextd/internal/store"
)

// unavailable marks, in place, the error of a database that could not be
// reached with store.ErrUnavailable: a connection refused or cut, a server
// shutting down, restarting or out of connection slots. Callers answer
// those with Unavailable, which clients retry, not Internal (during a
// PostgreSQL restart every call failed with Internal: cmd/soak). Every
// exported method of Store and InTx end with it.
func unavailable(errp *error) {
	if err := *errp; err != nil && !errors.Is(err, store.ErrUnavailable) && isUnavailable(err) {
		*errp = fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
}

func isUnavailable(err error) bool {
	// A caller that gave up is not a database away: context.DeadlineExceeded
	// is itself a net.Error, and pgconn calls a query on a done context
	// safe to retry.
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08: connection exception; 57P01-57P03: admin or crash
		// shutdown, cannot connect now; 53300: too many connections.
		return strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57P") || pgErr.Code == "53300"
	}
	var connect *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connect) || errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, io.EOF) || pgconn.SafeToRetry(err)
}
