// Package retention owns the background purge: originals past their
// retention that no active view or revertible compaction needs, deleted
// sessions, and old idempotency records; the closing of idle sessions
// (the gateway's, which no client ever deletes); and the sweep of view
// generations a rewrite staged and never made current (strays.go).
package retention

import (
	"context"
	"log/slog"
	"time"

	"github.com/contextd/contextd/internal/store"
)

// Idle says which sessions are closed when nothing changed them for After
// (0: never): those carrying the label key Label.
type Idle struct {
	Label string
	After time.Duration
}

// idleBatch is how many sessions one statement closes.
const idleBatch = 500

// Run purges every interval, keeping archives for keep, and closes idle
// sessions, until ctx ends. Several replicas may run it at once: deletes
// are idempotent.
func Run(ctx context.Context, st store.Store, every, keep time.Duration, idle Idle, log *slog.Logger) {
	if every <= 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	// A first look at startup: what a crash of this replica left is then
	// swept at the first tick (if the interval is at least StrayAge, and
	// the store holds at most the 100,000 sessions a pass looks at).
	strays := Strays{Age: StrayAge}
	sweepStrays(ctx, st, &strays, log)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			Once(ctx, st, keep, idle, log)
			sweepStrays(ctx, st, &strays, log)
		}
	}
}

// sweepStrays runs one pass of strays and logs what it did.
func sweepStrays(ctx context.Context, st store.Store, strays *Strays, log *slog.Logger) {
	gens, rows, err := strays.Sweep(ctx, st, time.Now())
	switch {
	case err != nil && ctx.Err() == nil:
		log.Warn("abandoned view generations sweep failed", "generations", gens, "rows", rows, "error", err)
	case gens > 0:
		log.Info("abandoned view generations swept", "generations", gens, "rows", rows)
	}
}

// Once closes the idle sessions, then runs one purge, and logs what it
// did. A closed session is archived as a deleted one is: out of its
// tenant's live count, its rows kept for keep, then purged.
func Once(ctx context.Context, st store.Store, keep time.Duration, idle Idle, log *slog.Logger) {
	now := time.Now()
	if idle.After > 0 && idle.Label != "" {
		n, err := st.CloseIdleSessions(ctx, idle.Label, now.Add(-idle.After), now, idleBatch)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("closing idle sessions failed", "label", idle.Label, "closed", n, "error", err)
		case n > 0:
			log.Info("idle sessions closed", "label", idle.Label, "idle_for", idle.After.String(), "sessions", n)
		}
	}
	p, err := st.Purge(ctx, now.Add(-keep), now)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("retention purge failed", "error", err)
		}
		return
	}
	log.Info("retention purge", "sessions", p.Sessions, "messages", p.Messages, "idempotency_keys", p.IdempotencyKeys)
}
