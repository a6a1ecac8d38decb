package engine

import (
	"context"
	"fmt"

	"github.com/contextd/contextd/internal/compaction"
)

// cacheAware adjusts an automatic compaction to the prompt cache (policy
// cache_payback_calls > 0). Every compaction aims at cache_target, below
// target: its rewrite costs about the same whatever it removes (everything
// after its first change is written again), while each token it removes is
// one fewer to read on every later call, and the next compaction moves
// further away. Below the emergency threshold, when the request fits,
// compacting is optional (with the tiers the level allows): the plan runs
// only if its savings repay the cache rewrite within cache_payback_calls
// calls. From the emergency threshold, or when the request would not fit,
// it is forced with every tier.
func cacheAware(in CompactInput, u Usage) CompactInput {
	p := u.Policy
	if p.CachePaybackCalls <= 0 {
		return in
	}
	target := p.CacheTarget
	in.Target = &target
	if u.Over > 0 || u.Level >= compaction.LevelHandoff {
		in.tiers = compaction.AllTiers
		return in
	}
	in.payback = p.CachePaybackCalls
	return in
}

// deferred reports whether a cache-aware compaction should not apply its
// plan: it would not repay its prompt-cache rewrite in time.
func (e *Engine) deferred(p planned, snap snapshot, in CompactInput) bool {
	if in.payback <= 0 {
		return false
	}
	read, write := p.model.CacheFactors()
	return p.plan.PaybackCalls(snap.view, read, write) > float64(in.payback)
}

// deferCompaction answers a compaction that cache-awareness put off: the
// view stays (and stays cached); auto-compaction is not paused, so it runs
// once it pays, or is forced at the emergency threshold.
func (e *Engine) deferCompaction(ctx context.Context, snap snapshot, res CompactResult) (CompactResult, error) {
	v, err := e.view(ctx, snap.session)
	res.Usage, res.Version, res.Compaction = v.Usage, snap.session.Version, nil
	res.Warnings = append(res.Warnings, deferredWarning(v.Usage))
	return res, err
}

func deferredWarning(u Usage) string {
	return fmt.Sprintf("compaction deferred: it would not repay its prompt-cache rewrite within %d calls (cache_payback_calls); it runs once it does, or at the emergency threshold",
		u.Policy.CachePaybackCalls)
}
