package watch

import (
	"context"
	"log/slog"
)

// ResolveFunc reads a session's status for a change. It returns ok=false
// when there is nothing to publish (for example the session is gone).
type ResolveFunc func(ctx context.Context, c Change) (Update, bool, error)

// Resolver turns changes into updates: it skips sessions nobody watches,
// coalesces bursts (one read per session per batch, at its newest version),
// and publishes to the hub.
type Resolver struct {
	hub     *Hub
	resolve ResolveFunc
	in      chan Change
	log     *slog.Logger
	last    map[key]int64 // newest version published per session
	batches int
}

// NewResolver returns a resolver; Run it, then feed it with Notify.
func NewResolver(hub *Hub, resolve ResolveFunc, log *slog.Logger) *Resolver {
	return &Resolver{hub: hub, resolve: resolve, in: make(chan Change, 8192), log: log, last: map[key]int64{}}
}

// Notify queues a change. It never blocks the caller (a request that just
// committed): when the queue is full the change is dropped and logged, and
// subscribers get that session's state with its next change.
func (r *Resolver) Notify(c Change) {
	select {
	case r.in <- c:
	default:
		r.log.Warn("watch queue full; change dropped", "session", c.SessionID, "version", c.Version)
	}
}

// Resync queues a re-read of every watched session, after the change feed
// was interrupted (a lost LISTEN connection).
func (r *Resolver) Resync(sessions func(tenant string) []string) {
	for _, k := range r.hub.WatchedKeys() {
		ids := []string{k[1]}
		if k[1] == "" {
			ids = sessions(k[0])
		}
		for _, id := range ids {
			r.Notify(Change{Tenant: k[0], SessionID: id, Event: EventResync})
		}
	}
}

// Run processes changes until ctx ends.
func (r *Resolver) Run(ctx context.Context) {
	for {
		var first Change
		select {
		case <-ctx.Done():
			return
		case first = <-r.in:
		}
		batch := map[key]Change{}
		add := func(c Change) {
			k := key{c.Tenant, c.SessionID}
			if cur, ok := batch[k]; !ok || c.Version >= cur.Version || c.Event == EventDeleted {
				if ok && cur.Event == EventDeleted {
					return
				}
				batch[k] = c
			}
		}
		add(first)
		if r.batches++; r.batches%1024 == 0 {
			for k := range r.last { // sessions whose watchers left without a change since
				if !r.hub.Watched(k.tenant, k.session) {
					delete(r.last, k)
				}
			}
		}
	drain:
		for len(batch) < 1024 {
			select {
			case c := <-r.in:
				add(c)
			default:
				break drain
			}
		}
		for k, c := range batch {
			if !r.hub.Watched(k.tenant, k.session) {
				delete(r.last, k) // nobody watches it: forget it, so memory follows the watchers
				continue
			}
			if c.Event != EventResync && c.Event != EventDeleted && c.Version <= r.last[k] {
				continue // already published at this version or newer
			}
			u, ok, err := r.resolve(ctx, c)
			if err != nil {
				r.log.Warn("watch: read status failed", "session", c.SessionID, "error", err)
				continue
			}
			if !ok {
				continue
			}
			if u.Event != EventDeleted && u.Version <= r.last[k] && c.Event == EventResync {
				continue
			}
			r.last[k] = max(r.last[k], u.Version)
			r.hub.Publish(u)
		}
	}
}
