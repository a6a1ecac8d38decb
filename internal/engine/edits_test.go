package engine_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/watch"
)

// changeLog records the changes an engine announces, as a watcher gets them.
type changeLog struct {
	mu      sync.Mutex
	changes []watch.Change
}

func (l *changeLog) Notify(_ context.Context, c watch.Change) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.changes = append(l.changes, c)
}

func (l *changeLog) last() watch.Change {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.changes) == 0 {
		return watch.Change{}
	}
	return l.changes[len(l.changes)-1]
}

func editedSession(t *testing.T, e *engine.Engine) engine.SessionView {
	t.Helper()
	v := newSession(t, e)
	msgs := []chat.Message{userMsg("Fix the failing build in ci.yml, please."), callMsg("c1"), resultMsg("c1", strings.Repeat("log line ", 50)),
		userMsg("Now also update the README: " + strings.Repeat("日本語のテキストを要約してください。", 10))}
	if _, err := e.AppendMessages(t.Context(), tenant, v.ID, engine.AppendInput{Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	v, err := e.GetSession(t.Context(), tenant, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestUpdateSession(t *testing.T) {
	log := &changeLog{}
	backendsWith(t, []engine.Option{engine.WithNotifier(log)}, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v := editedSession(t, e)
		got, err := e.UpdateSession(ctx, tenant, v.ID, engine.SessionUpdate{Mask: []string{"system_prompt", "labels"},
			System: strings.Repeat("Be careful with the build. ", 20), Labels: map[string]string{"team": "b"}})
		if err != nil {
			t.Fatal(err)
		}
		if got.Version != v.Version+1 || got.SystemTokens <= v.SystemTokens || got.Labels["team"] != "b" || got.Model != v.Model {
			t.Errorf("after update: version %d→%d system %d→%d labels %v model %q", v.Version, got.Version, v.SystemTokens, got.SystemTokens, got.Labels, got.Model)
		}
		if got.ActiveTokens != v.ActiveTokens || got.ViewEpoch != v.ViewEpoch {
			t.Errorf("same encoding: messages recounted (%d→%d) or epoch moved (%d→%d)", v.ActiveTokens, got.ActiveTokens, v.ViewEpoch, got.ViewEpoch)
		}
		if c := log.last(); c.SessionID != v.ID || c.Version != got.Version || c.Event != watch.EventUpdated {
			t.Errorf("watcher got %+v", c)
		}
		// A model with another encoding (cl100k_base) recounts the view.
		m, err := e.UpdateSession(ctx, tenant, v.ID, engine.SessionUpdate{Mask: []string{"model"}, Model: "gpt-4"})
		if err != nil {
			t.Fatal(err)
		}
		if m.Model != "gpt-4" || m.Version != got.Version+1 || m.ViewEpoch != got.ViewEpoch+1 || m.ActiveTokens == got.ActiveTokens {
			t.Errorf("model change: model %q version %d epoch %d tokens %d→%d", m.Model, m.Version, m.ViewEpoch, got.ActiveTokens, m.ActiveTokens)
		}
		page, err := e.GetMessages(ctx, tenant, v.ID, engine.ViewActive, engine.Page{})
		if err != nil {
			t.Fatal(err)
		}
		var sum int64
		for _, msg := range page.Messages {
			sum += msg.Tokens
		}
		if sum != m.ActiveTokens {
			t.Errorf("stored message counts sum to %d, session says %d", sum, m.ActiveTokens)
		}
		fresh, _ := e.CreateSession(ctx, tenant, engine.NewSession{Model: "gpt-4", System: m.SystemPrompt, Tools: m.Tools})
		if fresh.SystemTokens != m.SystemTokens || fresh.ToolsTokens != m.ToolsTokens {
			t.Errorf("recount differs from a fresh session's: %d/%d vs %d/%d", m.SystemTokens, m.ToolsTokens, fresh.SystemTokens, fresh.ToolsTokens)
		}
	})
}

func TestUpdateSessionRefusals(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v := editedSession(t, e)
		stale := v.Version - 1
		bad := "no-such-summarizer"
		for _, tc := range []struct {
			in    engine.SessionUpdate
			field string
		}{
			{engine.SessionUpdate{}, "update_mask"},
			{engine.SessionUpdate{Mask: []string{"system_prompt", "version"}}, "update_mask.paths[1]"},
			{engine.SessionUpdate{Mask: []string{"model"}}, "model"},
			{engine.SessionUpdate{Mask: []string{"tools"}, Tools: []chat.Tool{{Name: ""}}}, "tools"},
			{engine.SessionUpdate{Mask: []string{"policy"}, Policy: compaction.Overrides{Summarizer: &bad}}, "policy.summarizer"},
		} {
			_, err := e.UpdateSession(ctx, tenant, v.ID, tc.in)
			var inv *chat.InvalidError
			if !errors.As(err, &inv) || !strings.HasPrefix(inv.Violations[0].Field, tc.field) {
				t.Errorf("%+v: %v, want InvalidArgument naming %s", tc.in, err, tc.field)
			}
		}
		_, err := e.UpdateSession(ctx, tenant, v.ID, engine.SessionUpdate{Mask: []string{"system_prompt"}, System: "x", ExpectedVersion: &stale})
		if !errors.Is(err, store.ErrVersionConflict) {
			t.Errorf("stale expected_version: %v", err)
		}
		after, _ := e.GetSession(ctx, tenant, v.ID)
		if after.Version != v.Version || after.SystemPrompt != v.SystemPrompt {
			t.Errorf("a refused update changed the session: %+v", after.Session)
		}
	})
}

func TestClearMessagesAndRevert(t *testing.T) {
	log := &changeLog{}
	backendsWith(t, []engine.Option{engine.WithNotifier(log)}, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		for _, keep := range []bool{false, true} {
			v := editedSession(t, e)
			before, err := e.GetMessages(ctx, tenant, v.ID, engine.ViewActive, engine.Page{})
			if err != nil {
				t.Fatal(err)
			}
			stale := v.Version - 1
			if _, err := e.ClearMessages(ctx, tenant, v.ID, keep, &stale); !errors.Is(err, store.ErrVersionConflict) {
				t.Errorf("stale clear: %v", err)
			}
			res, err := e.ClearMessages(ctx, tenant, v.ID, keep, &v.Version)
			if err != nil {
				t.Fatal(err)
			}
			s := res.Session
			if s.Version != v.Version+1 || s.ViewEpoch != v.ViewEpoch+1 || s.SystemPrompt != v.SystemPrompt || len(s.Tools) != len(v.Tools) {
				t.Errorf("after clear: %+v", s.Session)
			}
			if c := log.last(); c.Version != s.Version || c.Event != watch.EventCompacted {
				t.Errorf("watcher got %+v", c)
			}
			view, _ := e.GetMessages(ctx, tenant, v.ID, engine.ViewActive, engine.Page{})
			switch {
			case keep && (len(view.Messages) != 1 || view.Messages[0].ID != before.Messages[0].ID || s.ActiveTokens != before.Messages[0].Tokens):
				t.Errorf("keep task: view %+v, tokens %d", view.Messages, s.ActiveTokens)
			case !keep && (len(view.Messages) != 0 || s.ActiveTokens != 0 || s.ActiveCount != 0):
				t.Errorf("clear: view %+v, tokens %d", view.Messages, s.ActiveTokens)
			}
			logPage, _ := e.GetMessages(ctx, tenant, v.ID, engine.ViewLog, engine.Page{})
			if len(logPage.Messages) != len(before.Messages) {
				t.Errorf("the log lost messages: %d of %d", len(logPage.Messages), len(before.Messages))
			}
			cp, err := e.ListCompactions(ctx, tenant, v.ID, engine.Page{})
			list := cp.Compactions
			if err != nil || len(list) != 1 || list[0].Tiers[0] != engine.ClearTier || res.Compaction == nil || list[0].ID != res.Compaction.ID {
				t.Fatalf("compactions: %+v, %v", list, err)
			}
			if _, err := e.RevertCompaction(ctx, tenant, v.ID, res.Compaction.ID); err != nil {
				t.Fatal(err)
			}
			back, _ := e.GetMessages(ctx, tenant, v.ID, engine.ViewActive, engine.Page{})
			if !reflect.DeepEqual(back.Messages, before.Messages) {
				t.Errorf("revert did not restore the exact view:\n got %+v\nwant %+v", back.Messages, before.Messages)
			}
			restored, _ := e.GetSession(ctx, tenant, v.ID)
			if restored.ActiveTokens != v.ActiveTokens || restored.ActiveCount != v.ActiveCount {
				t.Errorf("restored counts %d/%d, want %d/%d", restored.ActiveTokens, restored.ActiveCount, v.ActiveTokens, v.ActiveCount)
			}
		}
	})
}

// TestUpdateModelOfALongView: a view holding more bytes than one count may
// (CONTEXTD_MAX_COUNT_BYTES) still changes model: it is recounted in
// chunks, to the same totals as counting each message alone.
func TestUpdateModelOfALongView(t *testing.T) {
	backendsWith(t, []engine.Option{engine.WithLimits(engine.Limits{MaxCountBytes: 3000})}, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v := newSession(t, e)
		for i := 0; i < 6; i++ {
			if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: []chat.Message{userMsg(strings.Repeat("日本語のテキスト ", 100))}}); err != nil {
				t.Fatal(err)
			}
		}
		m, err := e.UpdateSession(ctx, tenant, v.ID, engine.SessionUpdate{Mask: []string{"model"}, Model: "gpt-4"})
		if err != nil {
			t.Fatal(err)
		}
		other, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "gpt-4"})
		if err != nil {
			t.Fatal(err)
		}
		var want int64
		for i := 0; i < 6; i++ {
			r, err := e.AppendMessages(ctx, tenant, other.ID, engine.AppendInput{Messages: []chat.Message{userMsg(strings.Repeat("日本語のテキスト ", 100))}})
			if err != nil {
				t.Fatal(err)
			}
			want += r.Messages[0].Tokens
		}
		if m.ActiveTokens != want || m.ActiveCount != 6 {
			t.Errorf("recounted %d tokens over %d messages, want %d over 6", m.ActiveTokens, m.ActiveCount, want)
		}
	})
}

// TestModelChangeRecountsRestoredMessages: after UpdateSession moves a
// session to a model with another encoding, the originals a compaction
// replaced (kept in the log only) are counted for the new model when
// ExpandMessage returns them and when a revert brings them back: the
// reverted view's counts equal those of a full recount. Both backends.
func TestModelChangeRecountsRestoredMessages(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		off := false
		v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "gpt-4", Policy: compaction.Overrides{AutoCompact: &off}}) // cl100k_base
		if err != nil {
			t.Fatal(err)
		}
		msgs := []chat.Message{userMsg("Translate the files.")}
		for i := 0; i < 8; i++ {
			id := fmt.Sprintf("call_%d", i)
			msgs = append(msgs, callMsg(id), resultMsg(id, fmt.Sprintf("file %d: %s", i, strings.Repeat("日本語のテキストを要約してください。", 40))))
		}
		msgs = append(msgs, userMsg("Now summarize them."))
		if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: msgs}); err != nil {
			t.Fatal(err)
		}
		low := 0.05
		res, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{Target: &low})
		if err != nil || !res.Compacted {
			t.Fatalf("compact: %+v, %v", res, err)
		}
		oldCounts := map[string]int64{}
		log, err := e.GetMessages(ctx, tenant, v.ID, engine.ViewLog, engine.Page{Size: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range log.Messages {
			oldCounts[m.ID] = m.Tokens
		}
		if _, err := e.UpdateSession(ctx, tenant, v.ID, engine.SessionUpdate{Mask: []string{"model"}, Model: "gpt-4o"}); err != nil {
			t.Fatal(err)
		}
		expanded := map[string]int64{}
		view, err := e.GetMessages(ctx, tenant, v.ID, engine.ViewActive, engine.Page{Size: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range view.Messages {
			for token := ""; ; {
				x, err := e.ExpandMessage(ctx, tenant, v.ID, m.ID, token)
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range x.Originals {
					expanded[o.ID] = o.Tokens
				}
				if token = x.Next; token == "" {
					break
				}
			}
		}
		if len(expanded) == 0 {
			t.Fatal("the compaction replaced nothing")
		}
		if _, err := e.RevertCompaction(ctx, tenant, v.ID, res.Compaction.ID); err != nil {
			t.Fatal(err)
		}
		checkFullRecount(t, e, v.ID)
		full, err := e.GetMessages(ctx, tenant, v.ID, engine.ViewActive, engine.Page{Size: 1000})
		if err != nil {
			t.Fatal(err)
		}
		changed := 0
		for _, m := range full.Messages {
			if n, ok := expanded[m.ID]; ok && n != m.Tokens {
				t.Errorf("ExpandMessage counted %s as %d tokens; gpt-4o: %d", m.ID, n, m.Tokens)
			}
			if _, ok := expanded[m.ID]; ok && oldCounts[m.ID] != m.Tokens {
				changed++
			}
		}
		if changed == 0 {
			t.Error("no restored message counts differently under gpt-4o: the test proves nothing")
		}
	})
}

// TestClearClosesOpenCalls: a tool call open when the view is cleared is
// closed (an interrupted result) before the clear, so its result sent after
// the clear is refused instead of landing after the task, [user(task),
// tool(c1)], a view OpenAI and Anthropic reject; the revert of the clear
// restores a valid view.
func TestClearClosesOpenCalls(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "gpt-4o"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: []chat.Message{userMsg("task"), callMsg("c1")}}); err != nil {
			t.Fatal(err)
		}
		res, err := e.ClearMessages(ctx, tenant, v.ID, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		var invalid *chat.InvalidError
		if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: []chat.Message{resultMsg("c1", "late")}}); !errors.As(err, &invalid) {
			t.Fatalf("the result of a call closed by the clear: %v", err)
		}
		p, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: []chat.Message{userMsg("go on")}})
		if err != nil {
			t.Fatal(err)
		}
		if err := compaction.ValidatePairs(p.Messages); err != nil || len(p.Messages) != 2 {
			t.Fatalf("view after the clear: %d messages, %v", len(p.Messages), err)
		}
		if _, err := e.RevertCompaction(ctx, tenant, v.ID, res.Compaction.ID); err != nil {
			t.Fatal(err)
		}
		view, err := e.GetMessages(ctx, tenant, v.ID, engine.ViewActive, engine.Page{})
		if err != nil {
			t.Fatal(err)
		}
		if err := compaction.ValidatePairs(view.Messages); err != nil || len(view.Messages) != 4 {
			t.Fatalf("view after the revert: %d messages, %v", len(view.Messages), err)
		}
	})
}
