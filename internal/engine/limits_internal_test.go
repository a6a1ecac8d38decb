package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/tokens"
)

// TestCountBudget: large requests share the server-wide budget (one larger
// than all of it runs alone), a bounded number wait, the rest are refused
// naming the setting, and small requests never wait.
func TestCountBudget(t *testing.T) {
	e := New(nil, nil, nil, WithLimits(Limits{MaxCountBytes: 1000, CountBudgetBytes: 1000, LargeCountBytes: 400}))
	ctx := t.Context()
	big := strings.Repeat("x", 1000)
	hold, err := e.admitCount(ctx, tokens.DefaultFraming, big, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Small: never waits, even with the budget taken.
	small, err := e.admitCount(ctx, tokens.DefaultFraming, "", "hello", nil, []chat.Message{{Role: chat.RoleUser, Parts: []chat.Part{{Type: chat.PartText, Text: "hi"}}}})
	if err != nil {
		t.Fatal(err)
	}
	small()
	// Large: waits for the budget.
	admitted := make(chan func(), 1)
	go func() {
		r, err := e.admitCount(ctx, tokens.DefaultFraming, "", big[:600], nil, nil)
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
	_, err = e.admitCount(ctx, tokens.DefaultFraming, "", "", []chat.Tool{{Name: "t", Description: big[:500]}}, nil)
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
	if _, err := e.admitCount(short, tokens.DefaultFraming, big[:500], "", nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting past the deadline: %v", err)
	}
	release()
	// Over the per-request limit: refused before any waiting, naming the size.
	if _, err := e.admitCount(ctx, tokens.DefaultFraming, big, "!", nil, nil); !errors.Is(err, ErrResourceExhausted) ||
		!strings.Contains(err.Error(), "costs 1001 bytes") || !strings.Contains(err.Error(), "CONTEXTD_MAX_COUNT_BYTES allows 1000") {
		t.Errorf("over the limit: %v", err)
	}
	// Everything was given back: the whole budget is free again.
	r, err := e.admitCount(ctx, tokens.DefaultFraming, big, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r()
}

// TestStructureIsCharged: each message, part and tool call is charged a
// fixed cost against the count limits, whatever its text (issue 24: a
// million empty parts counted as 0 bytes and took 400 MB), and the caps on
// parts and tool calls refuse a request naming the field.
func TestStructureIsCharged(t *testing.T) {
	e := New(nil, nil, nil, WithLimits(Limits{MaxCountBytes: 10_000}))
	empty := func(n int) []chat.Message {
		msgs := make([]chat.Message, n)
		for i := range msgs {
			msgs[i] = chat.Message{Role: chat.RoleUser, Parts: []chat.Part{{Type: chat.PartText}}}
		}
		return msgs
	}
	if _, err := e.admitCount(t.Context(), tokens.DefaultFraming, "", "", nil, empty(10)); err != nil {
		t.Fatalf("10 empty messages: %v", err)
	}
	want := 200 * (messageCost + partCost)
	if _, err := e.admitCount(t.Context(), tokens.DefaultFraming, "", "", nil, empty(200)); !errors.Is(err, ErrResourceExhausted) ||
		!strings.Contains(err.Error(), fmt.Sprintf("costs %d bytes", want)) {
		t.Errorf("200 empty messages: %v; want ResourceExhausted costing %d bytes", err, want)
	}
	calls := func(n int) chat.Message {
		m := chat.Message{Role: chat.RoleAssistant}
		for i := range n {
			m.Parts = append(m.Parts, chat.Part{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: fmt.Sprint("c", i), Name: "f", Arguments: "{}"}})
		}
		return m
	}
	manyParts := empty(1)
	manyParts[0].Parts = make([]chat.Part, chat.MaxPartsPerMessage+1)
	for i := range manyParts[0].Parts {
		manyParts[0].Parts[i].Type = chat.PartText
	}
	manyCalls := make([]chat.Message, chat.MaxToolCallsPerRequest/chat.MaxToolCallsPerMessage+1)
	for i := range manyCalls {
		manyCalls[i] = calls(chat.MaxToolCallsPerMessage)
	}
	for _, c := range []struct {
		name  string
		msgs  []chat.Message
		field string
	}{
		{"parts in a message", manyParts, "messages[0].parts"},
		{"tool calls in a message", []chat.Message{empty(1)[0], calls(chat.MaxToolCallsPerMessage + 1)}, "messages[1].parts"},
		{"tool calls in a request", manyCalls, "messages"},
	} {
		var inv *chat.InvalidError
		if err := chat.ValidateMessages("messages", c.msgs); !errors.As(err, &inv) || inv.Violations[0].Field != c.field {
			t.Errorf("%s: %v; want InvalidArgument on %s", c.name, err, c.field)
		}
	}
}
