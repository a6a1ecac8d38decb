package engine_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

// clientError reports whether err is one the API maps to a code other than
// Internal: something the caller asked for that was refused.
func clientError(err error) bool {
	var invalid *chat.InvalidError
	return errors.As(err, &invalid) || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrAlreadyExists) ||
		errors.Is(err, store.ErrVersionConflict) || errors.Is(err, engine.ErrFailedPrecondition) ||
		errors.Is(err, engine.ErrResourceExhausted)
}

// TestInterruptedToolCall: the reviewer's sequence [user, assistant(call X),
// user "stop"] used to brick the session once it reached the warning level
// (every plan failed pair validation: Internal forever). An unanswered call
// followed by anything but its result is recorded as interrupted, so the
// view stays valid for providers and compaction keeps working.
func TestInterruptedToolCall(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "gpt-4", System: "You are a coding agent."})
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: []chat.Message{
			userMsg("Fix the failing test in src/app.py."), callMsg("X"), userMsg("stop")}})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Messages) != 4 {
			t.Fatalf("stored %d messages, want 4 (one interrupted result)", len(res.Messages))
		}
		r := res.Messages[2]
		if r.Role != chat.RoleTool || r.Parts[0].ToolResult.ToolCallID != "X" || !r.Parts[0].ToolResult.IsError ||
			r.Metadata[engine.InterruptedMetadata] != "true" || r.Position != 3 || r.Tokens == 0 {
			t.Fatalf("interrupted result: %+v", r)
		}
		// The real result arriving later names the call and says why.
		_, err = e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: []chat.Message{resultMsg("X", "too late")}})
		if err == nil || !strings.Contains(err.Error(), "interrupted") {
			t.Fatalf("late result: %v", err)
		}
		// Another interruption in a later append (the call in one batch, the
		// next user turn in another), then fill the session past warning.
		if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: []chat.Message{callMsg("Y", "Z"), resultMsg("Z", "ok")}}); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 30; i++ {
			id := fmt.Sprintf("call_%d", i)
			batch := []chat.Message{userMsg(fmt.Sprintf("go on %d", i)), callMsg(id), resultMsg(id, strings.Repeat("lorem ipsum dolor ", 100))}
			if i%3 == 0 {
				batch = batch[:2] // interrupted by the next batch's user turn
			}
			p, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: batch})
			if err != nil {
				t.Fatalf("prepare %d: %v", i, err)
			}
			if err := compaction.ValidatePairs(p.Messages); err != nil {
				t.Fatalf("prepare %d returned a view providers reject: %v", i, err)
			}
		}
		list, err := e.ListCompactions(ctx, tenant, v.ID)
		if err != nil || len(list) == 0 {
			t.Fatalf("no compaction happened (%v): the test did not reach the warning level", err)
		}
		for _, tier := range compaction.AllTiers {
			if _, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{Tier: tier}); err != nil && !clientError(err) {
				t.Errorf("compact %s: %v", tier, err)
			}
		}
		log, err := e.GetMessages(ctx, tenant, v.ID, engine.ViewLog, engine.Page{Size: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if err := compaction.ValidatePairs(log.Messages); err != nil {
			t.Errorf("the log itself is not a valid conversation: %v", err)
		}
	})
}
