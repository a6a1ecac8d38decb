package watch_test

import (
	"errors"
	"testing"

	"github.com/contextd/contextd/internal/watch"
)

func TestSlowSubscriberCoalesces(t *testing.T) {
	h := watch.NewHub(10)
	slow, err := h.Subscribe("t", "s1")
	if err != nil {
		t.Fatal(err)
	}
	fast, _ := h.Subscribe("t", "s1")
	for v := int64(1); v <= 10_000; v++ {
		h.Publish(watch.Update{Tenant: "t", SessionID: "s1", Version: v, Event: watch.EventAppended})
		if v%1000 == 0 {
			fast.Drain()
		}
	}
	if n := slow.Pending(); n != 1 {
		t.Fatalf("slow subscriber holds %d updates, want 1 (the newest)", n)
	}
	got := slow.Drain()
	if len(got) != 1 || got[0].Version != 10_000 {
		t.Fatalf("drained %+v", got)
	}
	// A stale update never replaces a newer one.
	h.Publish(watch.Update{Tenant: "t", SessionID: "s1", Version: 20})
	h.Publish(watch.Update{Tenant: "t", SessionID: "s1", Version: 19})
	if got := slow.Drain(); got[0].Version != 20 {
		t.Errorf("stale update won: %+v", got)
	}
}

func TestTenantWideAndIsolation(t *testing.T) {
	h := watch.NewHub(10)
	all, _ := h.Subscribe("t", "")
	one, _ := h.Subscribe("t", "s1")
	other, _ := h.Subscribe("u", "")
	h.Publish(watch.Update{Tenant: "t", SessionID: "s1", Version: 1})
	h.Publish(watch.Update{Tenant: "t", SessionID: "s2", Version: 1})
	if n := len(all.Drain()); n != 2 {
		t.Errorf("tenant-wide got %d sessions", n)
	}
	if got := one.Drain(); len(got) != 1 || got[0].SessionID != "s1" {
		t.Errorf("one-session got %+v", got)
	}
	if n := other.Pending(); n != 0 {
		t.Errorf("another tenant got %d updates", n)
	}
	if !h.Watched("t", "s9") || h.Watched("v", "s1") {
		t.Error("Watched is wrong")
	}
	one.Close()
	all.Close()
	if h.Watched("t", "s1") || h.Count() != 1 {
		t.Errorf("closed subscriptions still counted: %d", h.Count())
	}
}

func TestLimitAndClose(t *testing.T) {
	h := watch.NewHub(2).WithTenantLimit(2) // the server-wide cap, with one tenant
	a, _ := h.Subscribe("t", "s")
	if _, err := h.Subscribe("t", "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Subscribe("t", "s"); !errors.Is(err, watch.ErrTooManySubscribers) {
		t.Fatalf("over the limit: %v", err)
	}
	h.Close()
	select {
	case <-a.Done():
	default:
		t.Fatal("Close did not end the subscription")
	}
	if _, err := h.Subscribe("t", "s"); !errors.Is(err, watch.ErrClosed) {
		t.Errorf("subscribe after close: %v", err)
	}
}

// TestDeletionIsNeverHidden: a pending update of a session does not hide
// its deletion (version 0), and the session re-created with its id after
// the deletion is drained after it (versions start again at 1).
func TestDeletionIsNeverHidden(t *testing.T) {
	h := watch.NewHub(10)
	sub, _ := h.Subscribe("t", "")
	h.Publish(watch.Update{Tenant: "t", SessionID: "s1", Version: 5, Event: watch.EventAppended})
	h.Publish(watch.Update{Tenant: "t", SessionID: "s1", Event: watch.EventDeleted})
	h.Publish(watch.Update{Tenant: "t", SessionID: "s1", Version: 1, Event: watch.EventUpdated})
	h.Publish(watch.Update{Tenant: "t", SessionID: "s1", Version: 2, Event: watch.EventAppended})
	got := sub.Drain()
	if len(got) != 2 || got[0].Event != watch.EventDeleted || got[1].Version != 2 {
		t.Fatalf("drained %+v; want the deletion, then version 2 of the new session", got)
	}
}
