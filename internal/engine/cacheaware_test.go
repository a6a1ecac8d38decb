package engine_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/tokens"
)

// TestCacheAwareDefersThenForces: with Anthropic cache prices, a compaction
// at the warning level that would not repay its cache rewrite is deferred
// (the view and its cache stay), and at the emergency threshold compaction
// is forced down to cache_target; the request never exceeds the window.
func TestCacheAwareDefersThenForces(t *testing.T) {
	price := tokens.Pricing{Input: 3, CachedInput: 0.3, CacheWrite: 3.75, Output: 15}
	models, err := tokens.NewRegistry([]tokens.Model{{Name: "cache-8k", Provider: "test", ContextWindow: 8192,
		MaxOutputTokens: 1024, Encoding: tokens.CL100KBase, Pricing: &price}})
	if err != nil {
		t.Fatal(err)
	}
	e := engine.New(tokens.NewEncodings(), models, openSQLite(t))
	ctx := t.Context()
	v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "cache-8k", System: "You are a coding agent."})
	if err != nil {
		t.Fatal(err)
	}
	usable := float64(v.Usage.ContextWindow - v.Usage.ReservedOutput)
	pending := []chat.Message{userMsg("Fix the failing test in src/app.py.")}
	deferred, forced := 0, 0
	for i := 0; i < 60 && forced == 0; i++ {
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
		if res.Status.Compacted {
			forced++
			before := float64(res.Status.LastCompaction.TokensBefore) / usable
			after := float64(u.Used) / usable
			if before < u.Policy.EmergencyThreshold || after > u.Policy.CacheTarget+0.05 {
				t.Fatalf("step %d: compacted from %.2f to %.2f of the window; want from the emergency threshold %.2f to about %.2f",
					i, before, after, u.Policy.EmergencyThreshold, u.Policy.CacheTarget)
			}
		}
	}
	if deferred == 0 || forced == 0 {
		t.Fatalf("%d deferred, %d forced compactions: want both", deferred, forced)
	}
}
