package watch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestResolverKeepsTheFinalState: a flood far beyond the queue never loses
// the last change of a session: what finds the queue full waits in the
// dirty set (one change per session), so every watcher ends at the final
// version of every session.
func TestResolverKeepsTheFinalState(t *testing.T) {
	hub := NewHub(10)
	sub, err := hub.Subscribe("t", "") // every session of the tenant
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	r := newResolver(hub, func(_ context.Context, c Change) (Update, bool, error) {
		return Update{Tenant: c.Tenant, SessionID: c.SessionID, Version: c.Version, Event: c.Event}, true, nil
	}, slog.New(slog.DiscardHandler), 16)
	const sessions, versions = 5, 400 // 2,000 changes into a queue of 16, before the resolver runs
	for v := int64(1); v <= versions; v++ {
		for s := range sessions {
			r.Notify(Change{Tenant: "t", SessionID: fmt.Sprint("s", s), Version: v, Event: EventAppended})
		}
	}
	if n := len(r.dirty); n != sessions {
		t.Fatalf("dirty set holds %d changes; want one per session (%d)", n, sessions)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go r.Run(ctx)
	final := map[string]int64{}
	deadline := time.After(10 * time.Second)
	for len(final) < sessions || slices.ContainsFunc(slices.Collect(maps.Values(final)), func(v int64) bool { return v != versions }) {
		select {
		case <-sub.C():
			for _, u := range sub.Drain() {
				if u.Version < final[u.SessionID] {
					t.Fatalf("%s went back from %d to %d", u.SessionID, final[u.SessionID], u.Version)
				}
				final[u.SessionID] = u.Version
			}
		case <-deadline:
			t.Fatalf("final versions %v; want %d for each of %d sessions", final, versions, sessions)
		}
	}
}

// TestTenantQuota: one tenant holds at most its share of the hub's slots
// (a quarter by default); the others keep subscribing, and a closed stream
// gives its slot back.
func TestTenantQuota(t *testing.T) {
	h := NewHub(8)
	var held []*Subscription
	for i := range 2 {
		s, err := h.Subscribe("greedy", fmt.Sprint("s", i))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, s)
	}
	if _, err := h.Subscribe("greedy", ""); !errors.Is(err, ErrTooManySubscribers) || !strings.Contains(err.Error(), `tenant "greedy"`) {
		t.Fatalf("a third stream of one tenant: %v", err)
	}
	for _, tenant := range []string{"other", "third"} {
		if _, err := h.Subscribe(tenant, ""); err != nil {
			t.Errorf("%s cannot subscribe while greedy is at its quota: %v", tenant, err)
		}
	}
	held[0].Close()
	held[0].Close() // twice is harmless
	if _, err := h.Subscribe("greedy", ""); err != nil {
		t.Errorf("after closing one: %v", err)
	}
	if n := h.WithTenantLimit(8).Count(); n != 4 {
		t.Errorf("count %d; want 4", n)
	}
}

// TestResolverForgetsDeletedVersions: a session deleted and re-created with
// its id (versions from 1 again) is published, whether the changes come in
// one batch or in several; the resolver remembered the deleted session's
// version and dropped them.
func TestResolverForgetsDeletedVersions(t *testing.T) {
	hub := NewHub(10)
	sub, err := hub.Subscribe("t", "")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	r := newResolver(hub, func(_ context.Context, c Change) (Update, bool, error) {
		return Update{Tenant: c.Tenant, SessionID: c.SessionID, Version: c.Version, Event: c.Event}, true, nil
	}, slog.New(slog.DiscardHandler), 16)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	next := func(want func(Update) bool) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case <-sub.C():
				for _, u := range sub.Drain() {
					if want(u) {
						return
					}
				}
			case <-deadline:
				t.Fatal("not published within 10 s")
			}
		}
	}
	// In one batch: queued before the resolver runs.
	r.Notify(Change{Tenant: "t", SessionID: "s", Version: 5, Event: EventAppended})
	r.Notify(Change{Tenant: "t", SessionID: "s", Event: EventDeleted})
	r.Notify(Change{Tenant: "t", SessionID: "s", Version: 1, Event: EventUpdated})
	go r.Run(ctx)
	next(func(u Update) bool { return u.Version == 1 && u.Event == EventUpdated })
	// In separate batches.
	for _, c := range []Change{{Version: 9, Event: EventAppended}, {Event: EventDeleted}, {Version: 2, Event: EventAppended}} {
		c.Tenant, c.SessionID = "t", "s"
		r.Notify(c)
		next(func(u Update) bool { return u.Version == c.Version && u.Event == c.Event })
	}
}

// TestResolverRetriesFailedReads: a read that fails (a store that just
// restarted hands out dead connections first) is tried again, not dropped:
// the watcher gets the change once the store answers.
func TestResolverRetriesFailedReads(t *testing.T) {
	hub := NewHub(10)
	sub, err := hub.Subscribe("t", "s")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var calls atomic.Int32
	r := newResolver(hub, func(_ context.Context, c Change) (Update, bool, error) {
		if calls.Add(1) <= 3 {
			return Update{}, false, errors.New("write: broken pipe")
		}
		return Update{Tenant: c.Tenant, SessionID: c.SessionID, Version: c.Version, Event: c.Event}, true, nil
	}, slog.New(slog.DiscardHandler), 16)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go r.Run(ctx)
	r.Notify(Change{Tenant: "t", SessionID: "s", Version: 7, Event: EventAppended})
	select {
	case <-sub.C():
		if got := sub.Drain(); len(got) != 1 || got[0].Version != 7 {
			t.Fatalf("got %+v", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the change was never published (%d reads)", calls.Load())
	}
	if n := calls.Load(); n != 4 {
		t.Errorf("%d reads, want 4 (3 failed)", n)
	}
}

// TestResolverBacksOffPerSession: a session whose read keeps failing is
// tried again with a growing delay, whatever else the resolver does
// meanwhile (changes of sessions nobody watches here keep coming, as every
// tenant's do on PostgreSQL): a handful of reads a second, not one per
// batch.
func TestResolverBacksOffPerSession(t *testing.T) {
	hub := NewHub(10)
	sub, err := hub.Subscribe("t", "bad")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var bad atomic.Int32
	r := newResolver(hub, func(_ context.Context, c Change) (Update, bool, error) {
		if c.SessionID == "bad" {
			bad.Add(1)
			return Update{}, false, errors.New("cannot decode the row")
		}
		return Update{Tenant: c.Tenant, SessionID: c.SessionID, Version: c.Version, Event: c.Event}, true, nil
	}, slog.New(slog.DiscardHandler), 16)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go r.Run(ctx)
	r.Notify(Change{Tenant: "t", SessionID: "bad", Version: 1, Event: EventAppended})
	stop := time.After(1500 * time.Millisecond)
	for i := int64(1); ; i++ {
		select {
		case <-stop:
			// 50 + 100 + 200 + 400 ms of waits fit: about 5 reads.
			if n := bad.Load(); n < 2 || n > 10 {
				t.Fatalf("%d reads of the failing session in 1.5 s; want a few, backing off", n)
			}
			return
		case <-time.After(2 * time.Millisecond):
			r.Notify(Change{Tenant: "t", SessionID: fmt.Sprint("other-", i%50), Version: i, Event: EventAppended})
		}
	}
}
