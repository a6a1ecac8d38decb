package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/postgres"
)

// TestRollbackKeepsTheDeadline: a transaction that fails while the network
// to the database went silent returns by its context's deadline — its
// ROLLBACK waits no longer than the caller would — instead of holding the
// call, and a connection of the pool, until TCP gives up. Both kinds of
// transaction (store.Pipelined or not) end the same way.
func TestRollbackKeepsTheDeadline(t *testing.T) {
	url := pgtest.URL(t)
	for _, pipelined := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "pipelined"}[pipelined], func(t *testing.T) {
			// Closed after the proxy (cleanups run last first): a call
			// still waiting on it is let go before the pool waits for
			// its connection.
			var s *postgres.Store
			t.Cleanup(func() {
				if s != nil {
					s.Close()
				}
			})
			l := pgtest.Faulty(t, url)
			proxied, freeze := l.URL, l.Silence
			var err error
			if s, err = postgres.Open(t.Context(), proxied); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			if pipelined {
				ctx = store.Pipelined(ctx)
			}
			refused := errors.New("refused by the caller")
			errc := make(chan error, 1)
			go func() {
				errc <- s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
					if _, err := tx.LogBytes(ctx, "t"); err != nil { // BEGIN sent with it
						return err
					}
					freeze()
					return refused
				})
			}()
			select {
			case err := <-errc:
				if !errors.Is(err, refused) {
					t.Errorf("%v, want the caller's error", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("InTx still waiting 10 s after it failed, its context's deadline 1 s")
			}
		})
	}
}
