// Package retention owns the background purge: originals past their
// retention that no active view or revertible compaction needs, deleted
// sessions, and old idempotency records.
package retention

import (
	"context"
	"log/slog"
	"time"

	"github.com/contextd/contextd/internal/store"
)

// Run purges every interval, keeping archives for keep, until ctx ends.
// Several replicas may run it at once: deletes are idempotent.
func Run(ctx context.Context, st store.Store, every, keep time.Duration, log *slog.Logger) {
	if every <= 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			Once(ctx, st, keep, log)
		}
	}
}

// Once runs one purge and logs what it removed.
func Once(ctx context.Context, st store.Store, keep time.Duration, log *slog.Logger) {
	now := time.Now()
	p, err := st.Purge(ctx, now.Add(-keep), now)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("retention purge failed", "error", err)
		}
		return
	}
	log.Info("retention purge", "sessions", p.Sessions, "messages", p.Messages, "idempotency_keys", p.IdempotencyKeys)
}
