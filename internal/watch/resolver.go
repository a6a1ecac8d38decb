package watch

import (
	"context"
	"log/slog"
	"sync"
	"time"
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

	// dirty holds, per session, the newest change that found the queue
	// full: a burst coalesces there instead of being dropped, so the final
	// state of every session is always published. It holds at most one
	// change per session.
	mu    sync.Mutex
	dirty map[key]Change
	wake  chan struct{} // one pending signal that dirty is not empty
	// A failed read is tried again, not dropped (a store that just
	// restarted hands out dead connections first): retries counts each
	// session's failed reads in a row (Run's alone) and sets the delay;
	// waiting holds the changes to try again (one per session, newer
	// changes merge in) until the one timer, running while waiting is not
	// empty, moves them back into dirty.
	retries map[key]int
	waiting map[key]Change
}

// retryDelay is how long a change whose read failed waits before it is
// tried again, after n failed batches in a row: 50 ms doubling to 5 s.
func retryDelay(n int) time.Duration {
	return min(50*time.Millisecond<<min(n, 7), 5*time.Second)
}

// NewResolver returns a resolver; Run it, then feed it with Notify.
func NewResolver(hub *Hub, resolve ResolveFunc, log *slog.Logger) *Resolver {
	return newResolver(hub, resolve, log, 8192)
}

func newResolver(hub *Hub, resolve ResolveFunc, log *slog.Logger, queue int) *Resolver {
	return &Resolver{hub: hub, resolve: resolve, in: make(chan Change, queue), log: log, last: map[key]int64{},
		dirty: map[key]Change{}, wake: make(chan struct{}, 1), retries: map[key]int{}, waiting: map[key]Change{}}
}

// Notify queues a change. It never blocks the caller (a request that just
// committed): when the queue is full the change goes to the dirty set, where
// it replaces any older change of its session.
func (r *Resolver) Notify(c Change) {
	select {
	case r.in <- c:
		return
	default:
	}
	r.mu.Lock()
	merge(r.dirty, c)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// merge keeps in m the change that wins for c's session: the newest version,
// and a deletion over anything.
func merge(m map[key]Change, c Change) {
	k := key{c.Tenant, c.SessionID}
	cur, ok := m[k]
	switch {
	case !ok, c.Event == EventDeleted:
		m[k] = c
	case cur.Event == EventDeleted:
	case c.Version >= cur.Version:
		m[k] = c
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
		batch := map[key]Change{}
		// A change after a deletion of its session in the same batch is
		// of a session re-created with that id: it is resolved in the
		// next batch, after the deletion is published.
		later := map[key]Change{}
		add := func(c Change) {
			if cur, ok := batch[key{c.Tenant, c.SessionID}]; ok && cur.Event == EventDeleted && c.Event != EventDeleted {
				merge(later, c)
				return
			}
			merge(batch, c)
		}
		select {
		case <-ctx.Done():
			return
		case first := <-r.in:
			add(first)
		case <-r.wake:
		}
		r.mu.Lock()
		if len(r.dirty) > 0 {
			for _, c := range r.dirty {
				add(c)
			}
			r.dirty = map[key]Change{}
		}
		r.mu.Unlock()
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
		failed := map[key]Change{}
		var firstErr error
		worst := 0 // the most failed reads in a row of a session in failed
		for k, c := range batch {
			if !r.hub.Watched(k.tenant, k.session) {
				delete(r.last, k) // nobody watches it: forget it, so memory follows the watchers
				delete(r.retries, k)
				continue
			}
			if c.Event != EventResync && c.Event != EventDeleted && c.Version <= r.last[k] {
				continue // already published at this version or newer
			}
			if firstErr != nil && len(failed) >= 2 {
				// Two reads of this batch failed: the store is likely down,
				// and the rest wait with them rather than each costing a
				// failing read now.
				merge(failed, c)
				worst = max(worst, r.retries[k])
				continue
			}
			u, ok, err := r.resolve(ctx, c)
			if err != nil {
				if ctx.Err() == nil {
					if firstErr == nil {
						firstErr = err
					}
					r.retries[k]++
					worst = max(worst, r.retries[k])
					merge(failed, c)
				}
				continue
			}
			delete(r.retries, k)
			if !ok {
				continue
			}
			if u.Event != EventDeleted && u.Version <= r.last[k] && c.Event == EventResync {
				continue
			}
			if u.Event == EventDeleted {
				// A session re-created with this id starts again at
				// version 1: forget the deleted one's versions.
				delete(r.last, k)
			} else {
				r.last[k] = max(r.last[k], u.Version)
			}
			r.hub.Publish(u)
		}
		if len(later) > 0 {
			r.requeue(later)
		}
		if len(failed) > 0 {
			r.retryLater(failed, retryDelay(max(worst-1, 0)), firstErr)
		}
	}
}

// retryLater holds failed changes until delay has passed (one timer for
// all of them: changes that fail meanwhile join those waiting), then puts
// them back into the dirty set.
func (r *Resolver) retryLater(failed map[key]Change, delay time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	timing := len(r.waiting) > 0 // the timer is already set
	for _, c := range failed {
		merge(r.waiting, c)
	}
	if timing {
		return
	}
	// One line per retry round, however many sessions it holds.
	r.log.Warn("watch: status reads failed; trying again", "sessions", len(r.waiting), "in", delay.String(), "error", err)
	time.AfterFunc(delay, func() {
		r.mu.Lock()
		waiting := r.waiting
		r.waiting = map[key]Change{}
		r.mu.Unlock()
		r.requeue(waiting)
	})
}

// requeue puts changes back into the dirty set and wakes Run.
func (r *Resolver) requeue(changes map[key]Change) {
	r.mu.Lock()
	for _, c := range changes {
		merge(r.dirty, c)
	}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}
