package contextctl

import (
	"fmt"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// RenderLedger is the cost line under the bar: calls (how many of them are
// estimates, Ledger.estimated), prefix-cache hit rate, estimated spend
// (with the summarizer's overhead) and the token totals.
// Nothing when no call was reported.
func RenderLedger(l *contextdv1.Ledger) string {
	c, o := l.GetCalls(), l.GetCompactionOverhead()
	if c.GetCalls() == 0 && o.GetCalls() == 0 {
		return ""
	}
	out := fmt.Sprintf("Cost %d calls", c.GetCalls())
	if n := l.GetEstimated().GetCalls(); n > 0 {
		// Included in the calls: the gateway's estimate of streams cut
		// before their usage (docs/gateway.md).
		out += fmt.Sprintf(" (%d estimated: a stream cut before its usage)", n)
	}
	out += fmt.Sprintf(" · cache hit %.1f%% · $%.4f", 100*l.GetCacheHitRate(), l.GetTotalCostUsd())
	if o.GetCalls() > 0 {
		out += fmt.Sprintf(" (compaction overhead $%.4f in %d calls)", o.GetCostUsd(), o.GetCalls())
	}
	out += fmt.Sprintf(" · input %s, cache reads %s, cache writes %s, output %s",
		short(c.GetInputTokens()), short(c.GetCacheReadTokens()), short(c.GetCacheWriteTokens()), short(c.GetOutputTokens()))
	if n := c.GetUnpricedCalls() + o.GetUnpricedCalls(); n > 0 {
		out += fmt.Sprintf(" · %d calls unpriced", n)
	}
	return out + "\n"
}
