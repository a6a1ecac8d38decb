package engine_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/watch"
)

// agentSession creates a gpt-4 session (8,192-token window) with a policy
// and fills it with steps of a coding agent: one tool call and a result of
// about 300 tokens each.
func agentSession(t *testing.T, e *engine.Engine, policy compaction.Overrides, steps int) engine.SessionView {
	t.Helper()
	return agentSessionID(t, e, "", policy, steps)
}

// agentSessionID is agentSession under a given id ("": generated).
func agentSessionID(t *testing.T, e *engine.Engine, id string, policy compaction.Overrides, steps int) engine.SessionView {
	t.Helper()
	ctx := t.Context()
	v, err := e.CreateSession(ctx, tenant, engine.NewSession{ID: id, Model: "gpt-4", System: "You are a coding agent.", Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	msgs := []chat.Message{userMsg("Fix the failing test in src/app.py.")}
	for i := 0; i < steps; i++ {
		id := fmt.Sprintf("call_%d", i)
		msgs = append(msgs, callMsg(id), resultMsg(id, fmt.Sprintf("step %d: %s", i, strings.Repeat("lorem ipsum dolor ", 100))))
	}
	if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestAutoCompactOffNeverCompacts(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		off := false
		v := agentSession(t, e, compaction.Overrides{AutoCompact: &off}, 16) // ~5,200 tokens: past 70 %
		res, err := e.PrepareContext(t.Context(), tenant, v.ID, engine.PrepareInput{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status.Compacted || len(res.Status.Warnings) == 0 || len(res.Messages) != 33 {
			t.Errorf("status %+v, %d messages", res.Status, len(res.Messages))
		}
		// Over the window: FAILED_PRECONDITION, not a silent compaction.
		more := []chat.Message{callMsg("x"), resultMsg("x", strings.Repeat("dolor sit amet ", 800))}
		_, err = e.PrepareContext(t.Context(), tenant, v.ID, engine.PrepareInput{Messages: more})
		if !errors.Is(err, engine.ErrFailedPrecondition) || !strings.Contains(err.Error(), "auto_compact is off") {
			t.Fatalf("got %v", err)
		}
		list, _ := compactionsOf(e, t.Context(), tenant, v.ID)
		if len(list) != 0 {
			t.Errorf("%d compactions with auto_compact off", len(list))
		}
	})
}

func TestPrepareCompactsAndExpands(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v := agentSession(t, e, compaction.Overrides{}, 18) // ~5,500 tokens of 6,964 usable: SUMMARIZE
		res, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: []chat.Message{userMsg("Go on.")}})
		if err != nil {
			t.Fatal(err)
		}
		st := res.Status
		if !st.Compacted || st.LastCompaction == nil || st.Usage.Used > int64(0.55*float64(st.Usage.ContextWindow-st.Usage.ReservedOutput)) {
			t.Fatalf("status: compacted %v, used %d, warnings %v", st.Compacted, st.Usage.Used, st.Warnings)
		}
		if res.Messages[0].Parts[0].Text != "Fix the failing test in src/app.py." || res.Messages[len(res.Messages)-1].Parts[0].Text != "Go on." {
			t.Errorf("task or latest request lost")
		}
		// What PrepareContext returns is exactly what is stored.
		stored, err := e.GetMessages(ctx, tenant, v.ID, engine.ViewActive, engine.Page{Size: 1000})
		if err != nil || !reflect.DeepEqual(stored.Messages, res.Messages) {
			t.Fatalf("returned view differs from the stored one (%v)", err)
		}
		// Every placeholder and summary expands to its originals.
		for _, m := range res.Messages {
			if m.Kind == chat.KindNormal {
				continue
			}
			x, err := e.ExpandMessage(ctx, tenant, v.ID, m.ID, "")
			if err != nil || len(x.Originals) == 0 || len(x.Originals) != len(m.Replaces) {
				t.Fatalf("expand %s: %+v, %v", m.ID, x, err)
			}
			if m.Kind == chat.KindSummary && !strings.Contains(m.Parts[0].Text, "## Original task") {
				t.Errorf("summary lacks its sections: %q", m.Parts[0].Text)
			}
		}
		if _, err := e.ExpandMessage(ctx, tenant, v.ID, "nope", ""); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("expand unknown: %v", err)
		}
		// The log is untouched.
		log, err := e.GetMessages(ctx, tenant, v.ID, engine.ViewLog, engine.Page{Size: 1000})
		if err != nil || len(log.Messages) != 38 {
			t.Errorf("log: %d messages, %v", len(log.Messages), err)
		}
	})
}

func TestCompactDryRunAndTiers(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v := agentSession(t, e, compaction.Overrides{}, 12)
		before, _ := e.GetSession(ctx, tenant, v.ID)
		dry, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{DryRun: true, Tier: compaction.TierPrune})
		if err != nil {
			t.Fatal(err)
		}
		after, _ := e.GetSession(ctx, tenant, v.ID)
		if dry.Compacted || dry.Compaction == nil || dry.Compaction.TokensAfter >= dry.Compaction.TokensBefore ||
			after.Version != before.Version || after.ActiveTokens != before.ActiveTokens {
			t.Fatalf("dry run: %+v; version %d → %d", dry, before.Version, after.Version)
		}
		if list, _ := compactionsOf(e, ctx, tenant, v.ID); len(list) != 0 {
			t.Errorf("dry run stored %d compactions", len(list))
		}
		low := 0.2
		res, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{Tier: compaction.TierPrune, Target: &low})
		if err != nil || !res.Compacted || !reflect.DeepEqual(res.Compaction.Tiers, []string{"prune"}) {
			t.Fatalf("prune: %+v, %v", res, err)
		}
		lower := 0.1
		sum, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{Tier: compaction.TierSummarize, Target: &lower, Instructions: "keep step details"})
		if err != nil || !sum.Compacted || !strings.Contains(sum.Compaction.Summary, "Requested focus") {
			t.Fatalf("summarize: %+v, %v", sum, err)
		}
		// Reverting out of order is refused; in order it works, once.
		if _, err := e.RevertCompaction(ctx, tenant, v.ID, res.Compaction.ID); !errors.Is(err, engine.ErrFailedPrecondition) {
			t.Errorf("revert of an older compaction first: %v", err)
		}
		for _, id := range []string{sum.Compaction.ID, res.Compaction.ID} {
			if _, err := e.RevertCompaction(ctx, tenant, v.ID, id); err != nil {
				t.Fatalf("revert %s: %v", id, err)
			}
		}
		if _, err := e.RevertCompaction(ctx, tenant, v.ID, res.Compaction.ID); !errors.Is(err, engine.ErrFailedPrecondition) {
			t.Errorf("second revert: %v", err)
		}
		if _, err := e.RevertCompaction(ctx, tenant, v.ID, "cmp_99"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown compaction: %v", err)
		}
		final, _ := e.GetSession(ctx, tenant, v.ID)
		if final.ActiveTokens != before.ActiveTokens || final.ActiveCount != before.ActiveCount {
			t.Errorf("after reverts: %d tokens / %d messages, before %d / %d", final.ActiveTokens, final.ActiveCount, before.ActiveTokens, before.ActiveCount)
		}
	})
}

func TestRevertWindowEnds(t *testing.T) {
	models, encodings := testModels(t)
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	e := engine.New(encodings, models, openSQLite(t), engine.WithClock(func() time.Time { return now }))
	v := agentSession(t, e, compaction.Overrides{}, 12)
	res, err := e.Compact(t.Context(), tenant, v.ID, engine.CompactInput{Tier: compaction.TierPrune})
	if err != nil || !res.Compacted {
		t.Fatalf("%+v, %v", res, err)
	}
	now = now.Add(engine.DefaultRevertWindow + time.Minute)
	if _, err := e.RevertCompaction(t.Context(), tenant, v.ID, res.Compaction.ID); !errors.Is(err, engine.ErrFailedPrecondition) ||
		!strings.Contains(err.Error(), "no longer") {
		t.Errorf("revert after the window: %v", err)
	}
}

func TestLowSavingsPausesAutoCompaction(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		// One pinned giant message fills the window: nothing can be compacted.
		v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "gpt-4"})
		if err != nil {
			t.Fatal(err)
		}
		big := chat.Message{Role: chat.RoleUser, Pinned: true, Parts: []chat.Part{{Type: chat.PartText, Text: strings.Repeat("spec ", 5000)}}}
		res, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: []chat.Message{big, {Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText, Text: "ok"}}}}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status.Compacted || !strings.Contains(strings.Join(res.Status.Warnings, " "), "paused") {
			t.Fatalf("first call: %+v", res.Status)
		}
		again, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{})
		if err != nil || !strings.Contains(strings.Join(again.Status.Warnings, " "), "paused") {
			t.Fatalf("second call: %+v, %v", again.Status, err)
		}
		if list, _ := compactionsOf(e, ctx, tenant, v.ID); len(list) != 0 {
			t.Errorf("%d compactions recorded", len(list))
		}
	})
}

func TestHandoff(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v := agentSession(t, e, compaction.Overrides{}, 5)
		h, err := e.CreateHandoff(ctx, tenant, v.ID, engine.HandoffInput{NewSession: true, NewSessionID: "continued"})
		if err != nil {
			t.Fatal(err)
		}
		for _, sec := range []string{"## ORIGINAL TASK", "## CURRENT", "## DONE", "## IN_PROGRESS", "## NEXT", "## FILES", "## ISSUES", "src/app.py"} {
			if !strings.Contains(h.Document, sec) {
				t.Errorf("document lacks %q:\n%s", sec, h.Document)
			}
		}
		if h.Session == nil || h.Session.ID != "continued" || h.Session.ActiveCount != 1 || h.Session.SystemPrompt != v.SystemPrompt {
			t.Fatalf("new session: %+v", h.Session)
		}
		msgs, err := e.GetMessages(ctx, tenant, "continued", engine.ViewActive, engine.Page{})
		if err != nil || !msgs.Messages[0].Pinned || msgs.Messages[0].Parts[0].Text != h.Document {
			t.Errorf("seed message: %+v, %v", msgs.Messages, err)
		}
		// A hand-off of the hand-off names its own parent, not the
		// grandparent whose label it inherited.
		h2, err := e.CreateHandoff(ctx, tenant, "continued", engine.HandoffInput{NewSession: true, NewSessionID: "continued-again"})
		if err != nil {
			t.Fatal(err)
		}
		if got := h2.Session.Labels["contextd.handoff_from"]; got != "continued" {
			t.Errorf("second hand-off's parent: %q, want %q", got, "continued")
		}
		if got := h.Session.Labels["contextd.handoff_from"]; got != v.ID {
			t.Errorf("first hand-off's parent: %q, want %q", got, v.ID)
		}
	})
}

// TestPauseIsAnnounced: pausing auto-compaction is a change of the session:
// the version is bumped past the append's, and watchers get the append and
// then STATUS_EVENT_WARNING at the new version (not at the append's, where
// it would replace or be dropped as a duplicate). Both backends.
func TestPauseIsAnnounced(t *testing.T) {
	log := &changeLog{}
	backendsWith(t, []engine.Option{engine.WithNotifier(log)}, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "gpt-4"})
		if err != nil {
			t.Fatal(err)
		}
		big := chat.Message{Role: chat.RoleUser, Pinned: true, Parts: []chat.Part{{Type: chat.PartText, Text: strings.Repeat("spec ", 5000)}}}
		log.mu.Lock()
		log.changes = nil
		log.mu.Unlock()
		if _, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: []chat.Message{big}}); err != nil {
			t.Fatal(err)
		}
		s, err := e.GetSession(ctx, tenant, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		if s.AutoPausedBelow == 0 {
			t.Fatal("auto-compaction was not paused")
		}
		log.mu.Lock()
		got := append([]watch.Change{}, log.changes...)
		log.mu.Unlock()
		if len(got) != 2 || got[0].Event != watch.EventAppended || got[1].Event != watch.EventWarning ||
			got[1].Version != s.Version || got[0].Version != s.Version-1 {
			t.Errorf("announced %+v; want appended at %d, then warning at %d", got, s.Version-1, s.Version)
		}
	})
}
