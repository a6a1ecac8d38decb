package contextctl

import (
	"fmt"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// RenderLedger is the cost line under the bar: calls, prefix-cache hit rate,
// estimated spend (with the summarizer's overhead) and the token totals.
// Nothing when no call was reported.
func RenderLedger(l *contextdv1.Ledger) string {
	c, o := l.GetCalls(), l.GetCompactionOverhead()
	if c.GetCalls() == 0 && o.GetCalls() == 0 {
		return ""
	}
	out := fmt.Sprintf("Cost %d calls · cache hit %.1f%% · $%.4f", c.GetCalls(), 100*l.GetCacheHitRate(), l.GetTotalCostUsd())
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
