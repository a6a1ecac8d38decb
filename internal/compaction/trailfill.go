package compaction

import "github.com/contextd/contextd/internal/chat"

// trailFillMax is the SummaryInput.TrailFillTokens of a summary that the
// view keeps kept after (the tail and the messages kept before the cut)
// with a cap of summaryCap for the rest of it: what the plan's target
// leaves the trail after the fixed part, those messages and that cap, in
// the measure the cut leaves room by (cutFor); -1 (no fill) when it leaves
// nothing. A trail that folds fills what placing left of its budget only
// up to that: filled to its budget, at a window of 8,000 the view after a
// summary that keeps only a large latest step ended above the target
// (3,438 and 3,480 tokens for 3,400, TestSummaryStaysWithinTarget). What
// the trail places is bounded by its budget alone: bounded by the target
// too, at 8k it kept 45 to 71 % of the commands in view (docs/compaction.md).
func (p *planner) trailFillMax(kept []chat.Message, summaryCap int) int {
	left := p.target - p.req.Fixed - sumTokens(kept) - int64(summaryCap)
	if left <= 0 {
		return -1
	}
	return int(left)
}

// TrailFillLimit is what a trail of budget tokens fills up to when it
// folds: its budget, within TrailFillTokens when set (0 when negative).
func (in SummaryInput) TrailFillLimit(budget int) int {
	switch {
	case in.TrailFillTokens > 0:
		return min(budget, in.TrailFillTokens)
	case in.TrailFillTokens < 0:
		return 0
	}
	return budget
}
