package engine_test

import (
	"errors"
	"math"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/sqlite"
	"github.com/contextd/contextd/internal/tokens"
)

// TestLedgerSumsReports sends concurrent ReportUsage calls and expects the
// ledger to hold exactly their sum, with the spend priced per call from the
// registry; a refused report adds nothing.
func TestLedgerSumsReports(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v := newSession(t, e) // gpt-4o
		if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: []chat.Message{userMsg("hello")}}); err != nil {
			t.Fatal(err)
		}
		models, _ := testModels(t)
		m, _ := models.Lookup("gpt-4o")
		var want store.LedgerTotals
		var mu sync.Mutex
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := range 10 {
					in := engine.ReportInput{InputTokens: int64(10 + w), CacheReadTokens: int64(100 * i), CacheCreationTokens: int64(w * i), OutputTokens: int64(i + 1)}
					if _, err := e.ReportUsage(ctx, tenant, v.ID, in); err != nil {
						t.Error(err)
						return
					}
					usd := m.Pricing.Cost(in.InputTokens, in.CacheReadTokens, in.CacheCreationTokens, in.OutputTokens)
					mu.Lock()
					want = want.Add(store.LedgerTotals{Calls: 1, Input: in.InputTokens, CacheRead: in.CacheReadTokens,
						CacheWrite: in.CacheCreationTokens, Output: in.OutputTokens, CostNanoUSD: int64(math.Round(usd * 1e9))})
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		stale := int64(0)
		if _, err := e.ReportUsage(ctx, tenant, v.ID, engine.ReportInput{InputTokens: 5, Version: &stale}); err == nil {
			t.Fatal("a report for a stale version was accepted")
		}
		got, err := e.GetSession(ctx, tenant, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Ledger == nil || got.Ledger.Calls != want || got.Ledger.Overhead != (store.LedgerTotals{}) {
			t.Fatalf("ledger = %+v, want calls %+v", got.Ledger, want)
		}
		f := engine.Figures(*got.Ledger)
		if wantRate := float64(want.CacheRead) / float64(want.Input+want.CacheRead+want.CacheWrite); math.Abs(f.HitRate-wantRate) > 1e-12 || f.TotalUSD <= 0 {
			t.Errorf("figures = %+v, want hit rate %.4f and a spend", f, wantRate)
		}
		st, err := e.SessionStatus(ctx, tenant, v.ID)
		if err != nil || st.Ledger == nil || *st.Ledger != *got.Ledger {
			t.Errorf("status ledger = %+v, %v", st.Ledger, err)
		}
		// An unknown model is recorded, unpriced.
		u, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "acme-unknown-7b"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.AppendMessages(ctx, tenant, u.ID, engine.AppendInput{Messages: []chat.Message{userMsg("hi")}}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.ReportUsage(ctx, tenant, u.ID, engine.ReportInput{InputTokens: 7, OutputTokens: 3}); err != nil {
			t.Fatal(err)
		}
		l, err := e.Ledger(ctx, tenant, u.ID)
		if err != nil || l.Calls != (store.LedgerTotals{Calls: 1, Input: 7, Output: 3, Unpriced: 1}) {
			t.Errorf("unknown model's ledger = %+v, %v", l, err)
		}
	})
}

// TestLedgerSurvivesRestart reopens the embedded database under a new
// engine and reads the same totals.
func TestLedgerSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	models, encodings := testModels(t)
	open := func() (*engine.Engine, store.Store) {
		st, err := sqlite.Open(t.Context(), dir)
		if err != nil {
			t.Fatal(err)
		}
		return engine.New(encodings, models, st), st
	}
	e, st := open()
	v := newSession(t, e)
	if _, err := e.AppendMessages(t.Context(), tenant, v.ID, engine.AppendInput{Messages: []chat.Message{userMsg("hello")}}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := e.ReportUsage(t.Context(), tenant, v.ID, engine.ReportInput{InputTokens: 11, CacheReadTokens: 22, OutputTokens: 33}); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := e.Ledger(t.Context(), tenant, v.ID)
	st.Close()
	e, st = open()
	defer st.Close()
	after, err := e.Ledger(t.Context(), tenant, v.ID)
	if err != nil || after != before || after.Calls.Calls != 3 || after.Calls.Input != 33 {
		t.Fatalf("after a restart: %+v, %v; before %+v", after, err, before)
	}
}

// TestSummarizerOverhead compacts with each LLM summarizer against the local
// fake server and expects the usage block of its answer in the ledger as
// compaction overhead, priced with the summarizer's model.
func TestSummarizerOverhead(t *testing.T) {
	for _, tc := range []struct {
		spec, model string
		want        store.LedgerTotals
	}{
		// prompt_tokens 100 of which 40 cached; completion 50.
		{"openai:gpt-4o-mini", "gpt-4o-mini", store.LedgerTotals{Calls: 1, Input: 60, CacheRead: 40, Output: 50}},
		// input 100, cache reads 30, cache writes 20, output 50.
		{"anthropic:claude-haiku-4-5", "claude-haiku-4-5", store.LedgerTotals{Calls: 1, Input: 100, CacheRead: 30, CacheWrite: 20, Output: 50}},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			srv := httptest.NewServer(&fakeLLM{mode: "ok"})
			defer srv.Close()
			e := llmEngine(t, srv)
			keepResults := 1000
			spec := tc.spec
			v := agentSession(t, e, compaction.Overrides{Summarizer: &spec, ProtectRecentToolResults: &keepResults}, 20)
			res, err := e.PrepareContext(t.Context(), tenant, v.ID, engine.PrepareInput{})
			if err != nil || !res.Status.Compacted {
				t.Fatalf("no compaction: %v %+v", err, res.Status)
			}
			models, _ := tokens.NewRegistry(nil)
			m, _ := models.Lookup(tc.model)
			want := tc.want
			want.CostNanoUSD = int64(math.Round(m.Pricing.Cost(want.Input, want.CacheRead, want.CacheWrite, want.Output) * 1e9))
			if res.Status.Ledger == nil || res.Status.Ledger.Overhead != want || res.Status.Ledger.Calls != (store.LedgerTotals{}) {
				t.Fatalf("ledger = %+v, want overhead %+v", res.Status.Ledger, want)
			}
		})
	}
}

// TestAbsurdReportsNeverBreakASession: token figures past what one call can
// bill are InvalidArgument naming the field; the largest accepted ones,
// reported again and again at an absurd price, leave the session readable.
func TestAbsurdReportsNeverBreakASession(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v := newSession(t, e)
		if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: []chat.Message{userMsg("hello")}}); err != nil {
			t.Fatal(err)
		}
		_, err := e.ReportUsage(ctx, tenant, v.ID, engine.ReportInput{InputTokens: 10, OutputTokens: math.MaxInt64 / 2})
		var inv *chat.InvalidError
		if !errors.As(err, &inv) || !strings.Contains(err.Error(), "output_tokens") {
			t.Fatalf("an absurd output_tokens: %v; want InvalidArgument naming it", err)
		}
		for range 3 {
			if _, err := e.ReportUsage(ctx, tenant, v.ID, engine.ReportInput{InputTokens: 100_000_000, CacheReadTokens: 100_000_000,
				CacheCreationTokens: 100_000_000, OutputTokens: 100_000_000}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.GetSession(ctx, tenant, v.ID); err != nil {
			t.Fatalf("GetSession after large reports: %v", err)
		}
		if _, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{}); err != nil {
			t.Fatalf("PrepareContext after large reports: %v", err)
		}
	})
}

// TestSummarizerOverheadBumpsTheVersion: the ledger entry of an LLM summary
// is a change of the session like a report: a new version (it stayed the
// same, so a client caching GetSession by version kept the old ledger),
// also for a dry run that changes nothing else; and a PrepareContext whose
// own summary bumps it meanwhile still commits.
func TestSummarizerOverheadBumpsTheVersion(t *testing.T) {
	srv := httptest.NewServer(&fakeLLM{mode: "ok"})
	defer srv.Close()
	e := llmEngine(t, srv)
	keepResults := 1000
	spec := "openai:gpt-4o-mini"
	v := agentSession(t, e, compaction.Overrides{Summarizer: &spec, ProtectRecentToolResults: &keepResults}, 20)
	ctx := t.Context()
	before, err := e.GetSession(ctx, tenant, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{Tier: compaction.TierSummarize, DryRun: true, DryRunLLM: true}); err != nil {
		t.Fatal(err)
	}
	after, err := e.GetSession(ctx, tenant, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.Ledger.Overhead.Calls != 1 || after.Version <= before.Version {
		t.Fatalf("after a dry run with the LLM: overhead %+v at version %d (was %d)", after.Ledger.Overhead, after.Version, before.Version)
	}
	res, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{})
	if err != nil || !res.Status.Compacted || res.Status.Ledger.Overhead.Calls != 2 {
		t.Fatalf("prepare: %v %+v", err, res.Status)
	}
}
