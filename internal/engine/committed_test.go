package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

var errAfterCommit = errors.New("store unreachable after the commit")

// commitFaults is a real store whose reads outside transactions fail from
// the moment a transaction commits, once armed: the connection lost right
// after a call's write.
type commitFaults struct {
	store.Store
	armed, failing bool
}

func (s *commitFaults) InTx(ctx context.Context, fn func(ctx context.Context, tx store.Tx) error) error {
	err := s.Store.InTx(ctx, fn)
	if err == nil && s.armed {
		s.failing = true
	}
	return err
}

func (s *commitFaults) GetCalibration(ctx context.Context, tenant, model string) (store.Calibration, error) {
	if s.failing {
		return store.Calibration{}, errAfterCommit
	}
	return s.Store.GetCalibration(ctx, tenant, model)
}

func (s *commitFaults) GetSession(ctx context.Context, tenant, id string) (store.Session, error) {
	if s.failing {
		return store.Session{}, errAfterCommit
	}
	return s.Store.GetSession(ctx, tenant, id)
}

func (s *commitFaults) ActiveMessages(ctx context.Context, tenant, id string, after int64, limit int) ([]chat.Message, []int64, error) {
	if s.failing {
		return nil, nil, errAfterCommit
	}
	return s.Store.ActiveMessages(ctx, tenant, id, after, limit)
}

// after runs call with the store failing after its first commit, and
// disarms it.
func (s *commitFaults) after(call func()) {
	s.armed = true
	call()
	s.armed, s.failing = false, false
}

// TestCommittedCallsSucceed: once an append (alone, in PrepareContext with
// or without a compaction), a report or a create is committed, a failure to
// build the rest of the answer is a warning on a successful answer, never
// the call's error (its retry would store the batch twice). Before, each of
// these answered the store's error after committing.
func TestCommittedCallsSucceed(t *testing.T) {
	models, encodings := testModels(t)
	backendStores(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		faults := &commitFaults{Store: st}
		e := engine.New(encodings, models, faults, engine.WithViewCacheBytes(0))
		logLen := func(id string) int {
			t.Helper()
			page, err := e.GetMessages(ctx, tenant, id, engine.ViewLog, engine.Page{Size: 1000})
			if err != nil {
				t.Fatal(err)
			}
			return len(page.Messages)
		}
		// An approximate model: its usage reads the tenant's calibration.
		var v engine.SessionView
		var err error
		faults.after(func() {
			v, err = e.CreateSession(ctx, tenant, engine.NewSession{Model: "claude-sonnet-4-5", System: "sys"})
		})
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		faults.after(func() {
			var res engine.AppendResult
			res, err = e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: []chat.Message{userMsg("task")}})
			if err == nil && (res.Version != 2 || len(res.Messages) != 1) {
				t.Errorf("append answer: %+v", res)
			}
		})
		if err != nil {
			t.Fatalf("append: %v", err)
		}
		faults.after(func() {
			var res engine.PrepareResult
			res, err = e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: []chat.Message{callMsg("c1"), resultMsg("c1", "ok")}})
			if err == nil && (len(res.Messages) != 3 || !strings.Contains(strings.Join(res.Status.Warnings, "\n"), errAfterCommit.Error())) {
				t.Errorf("prepare answer: %d messages, warnings %q", len(res.Messages), res.Status.Warnings)
			}
		})
		if err != nil {
			t.Fatalf("prepare: %v", err)
		}
		faults.after(func() {
			_, err = e.ReportUsage(ctx, tenant, v.ID, engine.ReportInput{InputTokens: 40, OutputTokens: 5})
		})
		if err != nil {
			t.Fatalf("report: %v", err)
		}
		if n := logLen(v.ID); n != 3 {
			t.Fatalf("log holds %d messages, want 3", n)
		}

		// PrepareContext that compacts, then loses the store.
		warn, target := 0.1, 0.05
		w := agentSession(t, e, compaction.Overrides{WarningThreshold: &warn, CriticalThreshold: &warn, Target: &target}, 6)
		before := logLen(w.ID)
		faults.after(func() {
			var res engine.PrepareResult
			res, err = e.PrepareContext(ctx, tenant, w.ID, engine.PrepareInput{Messages: []chat.Message{userMsg("go on")}})
			if err == nil && !res.Status.Compacted {
				t.Errorf("no compaction: %+v", res.Status)
			}
		})
		if err != nil {
			t.Fatalf("prepare with compaction: %v", err)
		}
		if n := logLen(w.ID); n != before+1 {
			t.Fatalf("log holds %d messages, want %d", n, before+1)
		}
	})
}

// TestRetriesAreSafe: the calls an agent retries after an ambiguous failure
// do not take effect twice: an append with content over the response bound
// is refused before it is stored, a replayed append answers the first
// answer (with content when asked), a report with a key is in the ledger
// once, and a create retried with the same id and settings answers the
// session it made.
func TestRetriesAreSafe(t *testing.T) {
	backendsWith(t, []engine.Option{engine.WithLimits(engine.Limits{MaxResponseBytes: 32 << 10})}, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v, err := e.CreateSession(ctx, tenant, engine.NewSession{ID: "retry", Model: "gpt-4o", System: "sys", Labels: map[string]string{"a": "b"}})
		if err != nil {
			t.Fatal(err)
		}
		again, err := e.CreateSession(ctx, tenant, engine.NewSession{ID: "retry", Model: "gpt-4o", System: "sys", Labels: map[string]string{"a": "b"}})
		if err != nil || again.ID != "retry" || again.Version != v.Version {
			t.Fatalf("retried create: %+v, %v", again.Session, err)
		}
		if _, err := e.CreateSession(ctx, tenant, engine.NewSession{ID: "retry", Model: "gpt-4o", System: "other"}); !errors.Is(err, store.ErrAlreadyExists) {
			t.Fatalf("create with other settings: %v", err)
		}

		big := []chat.Message{userMsg(strings.Repeat("lorem ipsum ", 4000))} // 48 KB
		_, err = e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: big, IncludeContent: true})
		if !errors.Is(err, engine.ErrResourceExhausted) || !strings.Contains(err.Error(), "nothing was appended") {
			t.Fatalf("append with content over the bound: %v", err)
		}
		if s, _ := e.GetSession(ctx, tenant, v.ID); s.Version != v.Version || s.LogCount != 0 {
			t.Fatalf("the refused append changed the session: %+v", s.Session)
		}
		in := engine.AppendInput{Messages: big, IdempotencyKey: "k"}
		first, err := e.AppendMessages(ctx, tenant, v.ID, in)
		if err != nil {
			t.Fatal(err)
		}
		replay, err := e.AppendMessages(ctx, tenant, v.ID, in)
		if err != nil || replay.Version != first.Version || len(replay.Messages) != 1 || replay.Messages[0].ID != first.Messages[0].ID ||
			replay.Messages[0].Tokens != first.Messages[0].Tokens || len(replay.Messages[0].Parts) != 0 {
			t.Fatalf("replay: %+v, %v", replay, err)
		}
		small := engine.AppendInput{Messages: []chat.Message{userMsg("hello")}, IdempotencyKey: "k2"}
		if _, err := e.AppendMessages(ctx, tenant, v.ID, small); err != nil {
			t.Fatal(err)
		}
		small.IncludeContent = true
		replay, err = e.AppendMessages(ctx, tenant, v.ID, small)
		if err != nil || len(replay.Messages) != 1 || replay.Messages[0].Parts[0].Text != "hello" {
			t.Fatalf("replay with content: %+v, %v", replay, err)
		}
		if s, _ := e.GetSession(ctx, tenant, v.ID); s.LogCount != 2 {
			t.Fatalf("log holds %d messages after the replays, want 2", s.LogCount)
		}

		report := engine.ReportInput{InputTokens: 100, OutputTokens: 7, IdempotencyKey: "r1"}
		for i := 0; i < 3; i++ {
			if _, err := e.ReportUsage(ctx, tenant, v.ID, report); err != nil {
				t.Fatal(err)
			}
		}
		l, err := e.Ledger(ctx, tenant, v.ID)
		if err != nil || l.Calls.Calls != 1 || l.Calls.Output != 7 {
			t.Fatalf("ledger after a report sent three times: %+v, %v", l.Calls, err)
		}
		report.OutputTokens = 8
		if _, err := e.ReportUsage(ctx, tenant, v.ID, report); !errors.Is(err, engine.ErrFailedPrecondition) {
			t.Fatalf("the key of another report: %v", err)
		}
	})
}
