package engine_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/summarize"
	"github.com/contextd/contextd/internal/tokens"
)

// TestCacheAwareDefersThenForces: with Anthropic cache prices, a compaction
// at the warning level that would not repay its cache rewrite is deferred
// (the view and its cache stay); one runs below the emergency threshold only
// when it repays its rewrite within cache_payback_calls; a forced one goes
// down to cache_target; the request never exceeds the window.
func TestCacheAwareDefersThenForces(t *testing.T) {
	price := tokens.Pricing{Input: 3, CachedInput: 0.3, CacheWrite: 3.75, Output: 15}
	models, err := tokens.NewRegistry([]tokens.Model{{Name: "cache-8k", Provider: "test", ContextWindow: 8192,
		MaxOutputTokens: 1024, Encoding: tokens.CL100KBase, Pricing: &price}})
	if err != nil {
		t.Fatal(err)
	}
	e := engine.New(tokens.NewEncodings(), models, openSQLite(t))
	for _, tc := range []struct {
		name    string
		payback *int
		// want: a deferred compaction, one forced at the emergency
		// threshold, one below it that pays.
		wantDeferred, wantForced, wantEarly bool
	}{
		// Pruning these tool results from 0.70 down to 0.30 of the window
		// repays its rewrite in about 9 calls: within the default 10 it runs
		// at once (its payback is checked below); within 2 it waits for the
		// emergency threshold, and so do the next ones: the summary leaves
		// room for the trail it needs, not for the trail's whole budget, so
		// it cuts no deeper than the target asks and no later compaction
		// repays within 2 calls.
		{name: "default", wantEarly: true},
		{name: "strict", payback: ptr(2), wantDeferred: true, wantForced: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "cache-8k", System: "You are a coding agent.",
				Policy: compaction.Overrides{CachePaybackCalls: tc.payback}})
			if err != nil {
				t.Fatal(err)
			}
			usable := float64(v.Usage.ContextWindow - v.Usage.ReservedOutput)
			pending := []chat.Message{userMsg("Fix the failing test in src/app.py.")}
			deferred, forced, early := 0, 0, 0
			for i := 0; i < 60 && forced+early < 3; i++ {
				id := fmt.Sprintf("call_%d", i)
				pending = append(pending, callMsg(id), resultMsg(id, fmt.Sprintf("step %d: %s", i, strings.Repeat("lorem ipsum dolor ", 60))))
				res, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: pending})
				if err != nil {
					t.Fatal(err)
				}
				pending = nil
				u := res.Status.Usage
				if u.Over > 0 {
					t.Fatalf("step %d: the request exceeds the window by %d", i, u.Over)
				}
				if strings.Contains(strings.Join(res.Status.Warnings, " "), "compaction deferred") {
					if res.Status.Compacted {
						t.Fatalf("step %d: deferred and compacted", i)
					}
					deferred++
				}
				if !res.Status.Compacted {
					continue
				}
				c := res.Status.LastCompaction
				before := float64(c.TokensBefore) / usable
				after := float64(u.Used) / usable
				if before >= u.Policy.EmergencyThreshold {
					forced++
					if after > u.Policy.CacheTarget+0.05 {
						t.Fatalf("step %d: forced compaction from %.2f to %.2f of the window; want about cache_target %.2f",
							i, before, after, u.Policy.CacheTarget)
					}
					continue
				}
				// Below the emergency threshold it must repay its rewrite:
				// (1.25 - 0.1) per rewritten token against 0.1 per saved
				// token and call.
				early++
				rewritten := float64(res.Cache.RequestTokens - res.Cache.StableTokens)
				if payback := rewritten * 1.15 / (0.1 * float64(c.TokensBefore-c.TokensAfter)); payback > float64(u.Policy.CachePaybackCalls) {
					t.Fatalf("step %d: compacted at %.2f of the window, below the emergency threshold, with a payback of %.1f calls (> %d)",
						i, before, payback, u.Policy.CachePaybackCalls)
				}
			}
			if (deferred > 0) != tc.wantDeferred || (forced > 0) != tc.wantForced || (early > 0) != tc.wantEarly {
				t.Fatalf("%d deferred, %d forced, %d early compactions; want deferred %v, forced %v, early %v",
					deferred, forced, early, tc.wantDeferred, tc.wantForced, tc.wantEarly)
			}
		})
	}
}

// TestCacheAwareDeferredBuysNoSummary: deciding whether a cache-aware
// compaction pays plans it with the extractive summarizer, so a deferred
// compaction calls no LLM, and a PrepareContext with nothing new while it is
// deferred writes nothing; once the compaction runs, the session's LLM
// writes its summary.
func TestCacheAwareDeferredBuysNoSummary(t *testing.T) {
	fake := &fakeLLM{mode: "ok"}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	price := tokens.Pricing{Input: 3, CachedInput: 0.3, CacheWrite: 3.75, Output: 15}
	models, err := tokens.NewRegistry([]tokens.Model{{Name: "cache-8k", Provider: "test", ContextWindow: 8192,
		MaxOutputTokens: 1024, Encoding: tokens.CL100KBase, Pricing: &price}})
	if err != nil {
		t.Fatal(err)
	}
	ep := summarize.Endpoint{APIKey: "k", Timeout: 2 * time.Second, BaseURL: srv.URL}
	set, err := summarize.NewSet("extractive", map[string]summarize.Endpoint{summarize.ProviderAnthropic: ep})
	if err != nil {
		t.Fatal(err)
	}
	backendStores(t, func(t *testing.T, st store.Store) {
		e := engine.New(tokens.NewEncodings(), models, st, engine.WithSummarizers(set))
		ctx := t.Context()
		spec, keep, payback := "anthropic:claude-haiku-4-5", 1000, 1
		v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "cache-8k", System: "sys",
			Policy: compaction.Overrides{Summarizer: &spec, ProtectRecentToolResults: &keep, CachePaybackCalls: &payback}})
		if err != nil {
			t.Fatal(err)
		}
		pending := []chat.Message{userMsg("task")}
		deferred, compacted := 0, 0
		for i := 0; i < 80 && compacted == 0; i++ {
			id := fmt.Sprintf("c%d", i)
			pending = append(pending, callMsg(id), resultMsg(id, strings.Repeat("lorem ipsum dolor ", 30)))
			before := fake.requests.Load()
			res, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: pending})
			if err != nil {
				t.Fatal(err)
			}
			pending = nil
			calls := fake.requests.Load() - before
			if res.Status.Compacted {
				compacted++
				if calls == 0 || res.Status.LastCompaction.Summary == "" {
					t.Fatalf("step %d: compacted with %d LLM calls, summary %q", i, calls, res.Status.LastCompaction.Summary)
				}
				continue
			}
			if !strings.Contains(strings.Join(res.Status.Warnings, " "), "compaction deferred") {
				continue
			}
			deferred++
			if calls != 0 {
				t.Fatalf("step %d: a deferred compaction made %d LLM calls", i, calls)
			}
			for j := 0; j < 3; j++ {
				again, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{})
				if err != nil {
					t.Fatal(err)
				}
				if again.Status.Version != res.Status.Version || again.Status.Compacted {
					t.Fatalf("step %d: an empty PrepareContext moved the session %d -> %d", i, res.Status.Version, again.Status.Version)
				}
			}
			if calls := fake.requests.Load() - before; calls != 0 {
				t.Fatalf("step %d: empty PrepareContext calls while deferred made %d LLM calls", i, calls)
			}
		}
		if deferred == 0 || compacted == 0 {
			t.Fatalf("%d deferred, %d compacted steps: want both", deferred, compacted)
		}
	})
}
