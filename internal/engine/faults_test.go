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
		list, err := compactionsOf(e, ctx, tenant, v.ID)
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

// TestPrepareIsAtomic: every way PrepareContext can fail leaves the
// session's version, log and active view as they were, so the same request
// can be retried as is.
func TestPrepareIsAtomic(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		off := false
		state := func(id string) (int64, int, int) {
			t.Helper()
			s, err := e.GetSession(ctx, tenant, id)
			if err != nil {
				t.Fatal(err)
			}
			log, _ := e.GetMessages(ctx, tenant, id, engine.ViewLog, engine.Page{Size: 1000})
			active, _ := e.GetMessages(ctx, tenant, id, engine.ViewActive, engine.Page{Size: 1000})
			return s.Version, len(log.Messages), len(active.Messages)
		}
		huge := []chat.Message{callMsg("big"), resultMsg("big", strings.Repeat("dolor sit amet ", 800))}
		stale := int64(1)
		manual := agentSession(t, e, compaction.Overrides{AutoCompact: &off}, 16)
		auto := agentSession(t, e, compaction.Overrides{}, 4)
		if _, err := e.PrepareContext(ctx, tenant, auto.ID, engine.PrepareInput{Messages: []chat.Message{userMsg("go on")}, IdempotencyKey: "k1"}); err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			name    string
			session string
			in      engine.PrepareInput
			want    func(error) bool
		}{
			{"auto_compact off and over", manual.ID, engine.PrepareInput{Messages: huge}, func(err error) bool { return errors.Is(err, engine.ErrFailedPrecondition) }},
			{"cannot fit at all", auto.ID, engine.PrepareInput{Messages: []chat.Message{userMsg(strings.Repeat("enormous ", 9000))}}, func(err error) bool { return errors.Is(err, engine.ErrFailedPrecondition) }},
			{"stale expected_version", auto.ID, engine.PrepareInput{Messages: huge, ExpectedVersion: &stale}, func(err error) bool { return errors.Is(err, store.ErrVersionConflict) }},
			{"idempotency key reused", auto.ID, engine.PrepareInput{Messages: huge, IdempotencyKey: "k1"}, func(err error) bool { return errors.Is(err, engine.ErrFailedPrecondition) }},
			{"result for an unknown call", auto.ID, engine.PrepareInput{Messages: []chat.Message{userMsg("x"), resultMsg("nope", "y")}}, func(err error) bool {
				var invalid *chat.InvalidError
				return errors.As(err, &invalid)
			}},
			{"unknown session", "no-such-session", engine.PrepareInput{Messages: huge}, func(err error) bool { return errors.Is(err, store.ErrNotFound) }},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				var v0 int64
				var l0, a0 int
				if tc.session != "no-such-session" {
					v0, l0, a0 = state(tc.session)
				}
				_, err := e.PrepareContext(ctx, tenant, tc.session, tc.in)
				if !tc.want(err) {
					t.Fatalf("got %v", err)
				}
				if tc.session == "no-such-session" {
					return
				}
				if v, l, a := state(tc.session); v != v0 || l != l0 || a != a0 {
					t.Errorf("after the failure: version %d→%d, log %d→%d, view %d→%d", v0, v, l0, l, a0, a)
				}
			})
		}
		// The refused request succeeds as is once there is room: compact
		// by hand, retry.
		if _, err := e.Compact(ctx, tenant, manual.ID, engine.CompactInput{}); err != nil {
			t.Fatal(err)
		}
		v0, l0, _ := state(manual.ID)
		res, err := e.PrepareContext(ctx, tenant, manual.ID, engine.PrepareInput{Messages: huge})
		if err != nil {
			t.Fatalf("retry after compacting: %v", err)
		}
		if v, l, _ := state(manual.ID); v != v0+1 || l != l0+2 || res.Status.Version != v {
			t.Errorf("retry: version %d→%d (status %d), log %d→%d", v0, v, res.Status.Version, l0, l)
		}
		// A compaction and the append it made room for are one change: the
		// log grows by the batch exactly once and the view fits.
		v0, l0, _ = state(auto.ID)
		for i := 0; i < 12; i++ {
			id := fmt.Sprintf("more_%d", i)
			res, err = e.PrepareContext(ctx, tenant, auto.ID, engine.PrepareInput{Messages: []chat.Message{callMsg(id), resultMsg(id, strings.Repeat("lorem ipsum dolor ", 100))}})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status.Usage.Over > 0 {
				t.Errorf("step %d: the returned view is %d tokens over", i, res.Status.Usage.Over)
			}
		}
		if _, l, _ := state(auto.ID); l != l0+24 || !res.Status.Compacted && len(mustCompactions(t, e, auto.ID)) == 0 {
			t.Errorf("log %d→%d after 12 steps of 2 messages; compactions %d", l0, l, len(mustCompactions(t, e, auto.ID)))
		}
	})
}

func mustCompactions(t *testing.T, e *engine.Engine, id string) []store.Compaction {
	t.Helper()
	list, err := compactionsOf(e, t.Context(), tenant, id)
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// TestRevertOnlyNewest: with two compactions applied, reverting the older
// one is refused, naming the newer; reverting newest first then the older
// works.
func TestRevertOnlyNewest(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v := agentSession(t, e, compaction.Overrides{}, 16)
		first, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{Tier: compaction.TierPrune})
		if err != nil || !first.Compacted {
			t.Fatalf("first compaction: %+v, %v", first, err)
		}
		if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: []chat.Message{userMsg(strings.Repeat("more context ", 400))}}); err != nil {
			t.Fatal(err)
		}
		second, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{Tier: compaction.TierSummarize})
		if err != nil || !second.Compacted {
			t.Fatalf("second compaction: %+v, %v", second, err)
		}
		_, err = e.RevertCompaction(ctx, tenant, v.ID, first.Compaction.ID)
		if !errors.Is(err, engine.ErrFailedPrecondition) || !strings.Contains(err.Error(), second.Compaction.ID) {
			t.Fatalf("reverting the older one first: %v", err)
		}
		if _, err := e.RevertCompaction(ctx, tenant, v.ID, second.Compaction.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := e.RevertCompaction(ctx, tenant, v.ID, first.Compaction.ID); err != nil {
			t.Fatalf("then the older one: %v", err)
		}
	})
}

// TestAbsurdReportDoesNotCalibrate: a report far from any tokenizer
// difference anchors the session but leaves the model's calibration (and
// so every other session's estimate) alone.
func TestAbsurdReportDoesNotCalibrate(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		a, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "claude-sonnet-4-5", System: "You are a coding agent."})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := e.CreateSession(ctx, tenant, engine.NewSession{Model: "claude-sonnet-4-5", System: "You are a coding agent."})
		for _, id := range []string{a.ID, b.ID} {
			if _, err := e.AppendMessages(ctx, tenant, id, engine.AppendInput{Messages: []chat.Message{userMsg(strings.Repeat("fix the build ", 50))}}); err != nil {
				t.Fatal(err)
			}
		}
		before, _ := e.SessionUsage(ctx, tenant, b.ID)
		u, err := e.ReportUsage(ctx, tenant, a.ID, engine.ReportInput{InputTokens: 50_000_000})
		if err != nil {
			t.Fatal(err)
		}
		if len(u.Warnings) == 0 || !strings.Contains(strings.Join(u.Warnings, " "), "not used to calibrate") {
			t.Errorf("no warning: %v", u.Warnings)
		}
		after, _ := e.SessionUsage(ctx, tenant, b.ID)
		if after.Used != before.Used || after.Source != before.Source {
			t.Errorf("another session's estimate moved: %d %v → %d %v", before.Used, before.Source, after.Used, after.Source)
		}
	})
}
