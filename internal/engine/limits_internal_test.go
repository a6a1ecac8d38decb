package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/chat"
)

// TestCountBudget: large requests share the server-wide budget (one larger
// than all of it runs alone), a bounded number wait, the rest are refused
// naming the setting, and small requests never wait.
func TestCountBudget(t *testing.T) {
	e := New(nil, nil, nil, WithLimits(Limits{MaxCountBytes: 1000, CountBudgetBytes: 1000, LargeCountBytes: 100}))
	ctx := t.Context()
	big := strings.Repeat("x", 1000)
	hold, err := e.admitCount(ctx, big, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Small: never waits, even with the budget taken.
	small, err := e.admitCount(ctx, "", "hello", nil, []chat.Message{{Role: chat.RoleUser, Parts: []chat.Part{{Type: chat.PartText, Text: "hi"}}}})
	if err != nil {
		t.Fatal(err)
	}
	small()
	// Large: waits for the budget.
	admitted := make(chan func(), 1)
	go func() {
		r, err := e.admitCount(ctx, "", big[:600], nil, nil)
		if err != nil {
			t.Error(err)
			close(admitted)
			return
		}
		admitted <- r
	}()
	// Once the waiter is queued (1000 running + 600 waiting of at most 2000),
	// a third large request is refused at once.
	for e.counting.waiting.TryAcquire(401) {
		e.counting.waiting.Release(401)
		time.Sleep(time.Millisecond)
	}
	_, err = e.admitCount(ctx, "", "", []chat.Tool{{Name: "t", Description: big[:500]}}, nil)
	if !errors.Is(err, ErrResourceExhausted) || !strings.Contains(err.Error(), "CONTEXTD_COUNT_BUDGET_BYTES") {
		t.Fatalf("queue full: %v", err)
	}
	select {
	case <-admitted:
		t.Fatal("a large request ran while the budget was held")
	case <-time.After(50 * time.Millisecond):
	}
	hold()
	hold() // releasing twice is harmless
	release := <-admitted
	if release == nil {
		t.FailNow()
	}
	// A waiter gives up with its context.
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := e.admitCount(short, big[:500], "", nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting past the deadline: %v", err)
	}
	release()
	// Over the per-request limit: refused before any waiting, naming the size.
	if _, err := e.admitCount(ctx, big, "!", nil, nil); !errors.Is(err, ErrResourceExhausted) ||
		!strings.Contains(err.Error(), "holds 1001 bytes") || !strings.Contains(err.Error(), "CONTEXTD_MAX_COUNT_BYTES allows 1000") {
		t.Errorf("over the limit: %v", err)
	}
	// Everything was given back: the whole budget is free again.
	r, err := e.admitCount(ctx, big, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r()
}
