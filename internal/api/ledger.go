package api

import (
	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/tokens"
)

func pricingToProto(p *tokens.Pricing) *contextdv1.ModelPricing {
	if p == nil {
		return nil
	}
	return &contextdv1.ModelPricing{Input: p.Input, CachedInput: p.CachedInput, CacheWrite: p.CacheWrite, Output: p.Output}
}

func ledgerTotalsToProto(t store.LedgerTotals) *contextdv1.LedgerTotals {
	return &contextdv1.LedgerTotals{Calls: t.Calls, InputTokens: t.Input, CacheReadTokens: t.CacheRead,
		CacheWriteTokens: t.CacheWrite, OutputTokens: t.Output, CostUsd: float64(t.CostNanoUSD) / 1e9, UnpricedCalls: t.Unpriced}
}

func ledgerToProto(l *store.Ledger) *contextdv1.Ledger {
	if l == nil {
		return nil
	}
	f := engine.Figures(*l)
	return &contextdv1.Ledger{Calls: ledgerTotalsToProto(l.Calls), CompactionOverhead: ledgerTotalsToProto(l.Overhead),
		CacheHitRate: f.HitRate, TotalCostUsd: f.TotalUSD, Estimated: ledgerTotalsToProto(l.Estimated)}
}

var breakpointKindToProto = map[engine.BreakpointKind]contextdv1.CacheBreakpointKind{
	engine.BreakpointSystem:       contextdv1.CacheBreakpointKind_CACHE_BREAKPOINT_KIND_SYSTEM,
	engine.BreakpointSummary:      contextdv1.CacheBreakpointKind_CACHE_BREAKPOINT_KIND_SUMMARY,
	engine.BreakpointStablePrefix: contextdv1.CacheBreakpointKind_CACHE_BREAKPOINT_KIND_STABLE_PREFIX,
	engine.BreakpointRequestEnd:   contextdv1.CacheBreakpointKind_CACHE_BREAKPOINT_KIND_REQUEST_END,
}

func cacheHintsToProto(h engine.CacheHints) *contextdv1.CacheHints {
	out := &contextdv1.CacheHints{HasPrevious: h.HasPrevious, FixedStable: h.FixedStable,
		StablePrefixMessages: h.StableMessages, StablePrefixTokens: h.StableTokens, RequestTokens: h.RequestTokens}
	if h.CompactionChangedFrom >= 0 {
		out.CompactionChangedFrom = &h.CompactionChangedFrom
	}
	for _, b := range h.Breakpoints {
		out.Breakpoints = append(out.Breakpoints, &contextdv1.CacheBreakpoint{Kind: breakpointKindToProto[b.Kind],
			MessageIndex: b.Index, PrefixTokens: b.PrefixTokens})
	}
	return out
}
