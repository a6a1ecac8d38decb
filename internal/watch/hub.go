// Package watch owns live status fan-out: the in-process Hub that holds one
// coalescing mailbox per subscriber, the Resolver that turns change
// notifications into statuses (one store read per change, whatever the
// number of subscribers), and the PostgreSQL LISTEN/NOTIFY transport that
// carries changes across replicas.
package watch

import (
	"errors"
	"fmt"
	"sync"
)

// Event names what changed.
type Event string

// Events.
const (
	EventAppended  Event = "appended"
	EventCompacted Event = "compacted"
	EventReverted  Event = "reverted"
	EventWarning   Event = "warning"
	EventDeleted   Event = "deleted"
	EventUpdated   Event = "updated"
	// EventResync asks for the current state after a lost connection.
	EventResync Event = "resync"
)

// Change is a notification that a session changed: ids and version only,
// so it fits a PostgreSQL NOTIFY payload with room to spare.
type Change struct {
	Tenant    string `json:"t"`
	SessionID string `json:"s"`
	Version   int64  `json:"v"`
	Event     Event  `json:"e"`
}

// Update is what subscribers receive: the session's status at a version.
type Update struct {
	Tenant    string
	SessionID string
	Version   int64
	Event     Event
	Payload   any // the status, as the resolver built it
}

// ErrTooManySubscribers is returned when the hub is at its limit.
var ErrTooManySubscribers = errors.New("too many watch subscribers on this server")

type key struct{ tenant, session string }

// Hub fans updates out to subscribers. Each subscriber has a mailbox that
// keeps only the newest update per session, so a slow subscriber costs
// constant memory per session it watches and never slows the others.
type Hub struct {
	mu     sync.Mutex
	subs   map[key]map[*Subscription]struct{} // session "" = every session of the tenant
	count  int
	limit  int
	closed bool
	// perTenant counts each tenant's subscribers, at most tenantLimit, so
	// one tenant cannot take every slot of the server.
	perTenant   map[string]int
	tenantLimit int
}

// NewHub returns a hub that admits at most limit subscribers, and at most
// a quarter of them (at least one) per tenant; WithTenantLimit changes that.
func NewHub(limit int) *Hub {
	return &Hub{subs: map[key]map[*Subscription]struct{}{}, limit: limit, perTenant: map[string]int{}, tenantLimit: max(1, limit/4)}
}

// WithTenantLimit sets how many subscribers one tenant may hold (n > 0).
func (h *Hub) WithTenantLimit(n int) *Hub {
	h.tenantLimit = n
	return h
}

// Subscription is one subscriber's mailbox.
type Subscription struct {
	hub     *Hub
	k       key
	signal  chan struct{} // capacity 1: "something is pending"
	done    chan struct{} // closed when the hub closes
	mu      sync.Mutex
	pending map[string]Update // newest update per session
	// reborn holds, per session whose deletion is pending, the newest
	// update of the session re-created with its id since: drained after
	// the deletion, so neither hides the other.
	reborn map[string]Update
}

// Subscribe registers a subscriber for one session, or for every session of
// the tenant when session is "".
func (h *Hub) Subscribe(tenant, session string) (*Subscription, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	if h.count >= h.limit {
		return nil, ErrTooManySubscribers
	}
	if h.perTenant[tenant] >= h.tenantLimit {
		return nil, fmt.Errorf("%w: tenant %q holds %d streams, the most one tenant may (CONTEXTD_WATCH_MAX_SUBSCRIBERS_PER_TENANT)", ErrTooManySubscribers, tenant, h.tenantLimit)
	}
	s := &Subscription{hub: h, k: key{tenant, session}, signal: make(chan struct{}, 1),
		done: make(chan struct{}), pending: map[string]Update{}, reborn: map[string]Update{}}
	if h.subs[s.k] == nil {
		h.subs[s.k] = map[*Subscription]struct{}{}
	}
	h.subs[s.k][s] = struct{}{}
	h.count++
	h.perTenant[tenant]++
	return s, nil
}

// ErrClosed is returned by Subscribe after Close.
var ErrClosed = errors.New("watch hub closed: the server is shutting down")

// Publish delivers u to the subscribers of its session and of its tenant.
func (h *Hub) Publish(u Update) {
	h.mu.Lock()
	var targets []*Subscription
	for _, k := range []key{{u.Tenant, u.SessionID}, {u.Tenant, ""}} {
		for s := range h.subs[k] {
			targets = append(targets, s)
		}
	}
	h.mu.Unlock()
	for _, s := range targets {
		s.offer(u)
	}
}

// Watched reports whether anyone watches the session (directly or through
// its tenant), so unwatched changes cost nothing.
func (h *Hub) Watched(tenant, session string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs[key{tenant, session}]) > 0 || len(h.subs[key{tenant, ""}]) > 0
}

// WatchedKeys returns the watched (tenant, session) pairs; session "" means
// the whole tenant.
func (h *Hub) WatchedKeys() [][2]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([][2]string, 0, len(h.subs))
	for k := range h.subs {
		out = append(out, [2]string{k.tenant, k.session})
	}
	return out
}

// Count returns the number of subscribers.
func (h *Hub) Count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.count
}

// Close ends every subscription (their Done channels close) and refuses new
// ones. It is how streams learn that the server is stopping.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	for _, set := range h.subs {
		for s := range set {
			close(s.done)
		}
	}
}

func (s *Subscription) offer(u Update) {
	s.mu.Lock()
	cur, ok := s.pending[u.SessionID]
	switch {
	case !ok:
		s.pending[u.SessionID] = u
	case u.Event == EventDeleted:
		// A deletion wins over whatever was pending (its version is 0)
		// and over a re-creation pending after an earlier deletion.
		s.pending[u.SessionID] = u
		delete(s.reborn, u.SessionID)
	case cur.Event == EventDeleted:
		if r, ok := s.reborn[u.SessionID]; !ok || u.Version >= r.Version {
			s.reborn[u.SessionID] = u
		}
	case u.Version >= cur.Version:
		s.pending[u.SessionID] = u
	}
	s.mu.Unlock()
	select {
	case s.signal <- struct{}{}:
	default: // already signalled
	}
}

// C signals that updates are pending.
func (s *Subscription) C() <-chan struct{} { return s.signal }

// Done is closed when the hub closes (server shutdown).
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Drain returns the pending updates (newest per session) and empties the
// mailbox.
func (s *Subscription) Drain() []Update {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Update, 0, len(s.pending)+len(s.reborn))
	for id, u := range s.pending {
		out = append(out, u)
		delete(s.pending, id)
	}
	for id, u := range s.reborn { // after their sessions' deletions
		out = append(out, u)
		delete(s.reborn, id)
	}
	return out
}

// Pending returns how many updates wait in the mailbox.
func (s *Subscription) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// Close unregisters the subscription.
func (s *Subscription) Close() {
	h := s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if set, ok := h.subs[s.k]; ok {
		if _, ok := set[s]; ok {
			delete(set, s)
			h.count--
			if h.perTenant[s.k.tenant]--; h.perTenant[s.k.tenant] <= 0 {
				delete(h.perTenant, s.k.tenant)
			}
			if len(set) == 0 {
				delete(h.subs, s.k)
			}
		}
	}
}
