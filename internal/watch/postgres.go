package watch

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/contextd/contextd/internal/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Channel is the PostgreSQL NOTIFY channel of status changes.
const Channel = "contextd_status"

// PGNotifier announces changes to every replica with NOTIFY.
type PGNotifier struct {
	Pool *pgxpool.Pool
	Log  *slog.Logger
}

// Notify sends c on the channel. A failure is logged, not returned: the
// change is committed either way, and listeners re-sync when they reconnect.
func (n PGNotifier) Notify(ctx context.Context, c Change) {
	payload, _ := json.Marshal(c)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := n.Pool.Exec(ctx, "SELECT pg_notify($1, $2)", Channel, string(payload)); err != nil {
		n.Log.Warn("notify failed", "session", c.SessionID, "error", err)
	}
}

// Listen keeps a dedicated connection LISTENing on the channel and feeds
// the resolver until ctx ends. After every (re)connect it asks for a resync,
// so nothing changed while it was away is missed. Backoff grows from 100 ms
// to 5 s between attempts.
func Listen(ctx context.Context, connString string, r *Resolver, resync func(), log *slog.Logger) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := listenOnce(ctx, connString, r, func() { backoff = 100 * time.Millisecond; resync() })
		if ctx.Err() != nil {
			return
		}
		log.Warn("status listener disconnected; reconnecting", "error", err, "backoff", backoff.String())
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func listenOnce(ctx context.Context, connString string, r *Resolver, connected func()) error {
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+Channel); err != nil {
		return err
	}
	connected()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		var c Change
		if json.Unmarshal([]byte(n.Payload), &c) == nil && c.SessionID != "" {
			r.Notify(c)
		}
	}
}

// LocalNotifier delivers changes to this process's resolver (the SQLite
// backend: one process).
type LocalNotifier struct{ R *Resolver }

// Notify implements the engine's notifier.
func (n LocalNotifier) Notify(_ context.Context, c Change) { n.R.Notify(c) }

// NotifyTx sends c from inside tx, delivered when tx commits; false when tx
// cannot (the caller then calls Notify after the commit).
func (n PGNotifier) NotifyTx(ctx context.Context, tx store.Tx, c Change) (bool, error) {
	nt, ok := tx.(store.TxNotifier)
	if !ok {
		return false, nil
	}
	payload, _ := json.Marshal(c)
	return true, nt.Notify(ctx, Channel, string(payload))
}
