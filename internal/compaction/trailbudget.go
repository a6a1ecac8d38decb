package compaction

// TrailShare is the share of the usable window (the window minus the
// reserved output) that the exact artifact trail of a summary may take
// (internal/summarize writes it after the rest of the summary). It scales
// with the window, as the artifacts an agent makes between two compactions
// do. The trail takes only what it needs (the planner asks Request.Trail,
// summarize.MeasureTrail), so the budget costs nothing where it is not
// used: 0.30 kept 96.5 % of the commands verbatim in view at 16k on the
// corpus (make bench-recall) for +4.3 % on the bill; 0.20 kept 83 %.
// With the trail's older lines shown dense (their texts alone,
// internal/summarize), which made the trail cheaper, 0.35 keeps 89 % of the commands in view at 8k and 99.9 % at
// 12k for +2.1 % and +3.3 % on the bill against before the trail (0.30:
// 85 % and 98 %, +1.3 % and +2.9 %; 0.40: 91 % and 100 %, +3.1 % and
// +3.5 %, but at 8,000 tokens the view after a summary then overshot the
// target, TestSummaryStaysWithinTarget: 3,564 tokens for 3,400); with
// the dense texts unindented, 90 % and 100 % for +1.6 % and +2.6 %; with
// a failing command's status on its dense head, 89.9 % and 100 % for
// +1.9 % and +2.9 %. It is never more than the request has left
// (trailRoom); at small usable windows the view after a summary can
// overshoot the target (docs/compaction.md, "Budget"), not the window.
const TrailShare = 0.35

// TrailBudget is the tokens the trail may take in a summary of a session
// with policy p and context window window: TrailShare of the usable window,
// at least min(summary_max_tokens, 4000) (what it was before it scaled).
func TrailBudget(p Policy, window int64) int {
	return max(int(TrailShare*float64(window-p.ReservedOutputTokens)), fixedTrailBudget(p.SummaryMaxTokens))
}

// fixedTrailBudget is the trail's budget where no window applies (a
// hand-off, a summary input that names no budget): as much as the rest of
// the summary, at most 4,000.
func fixedTrailBudget(summaryMaxTokens int) int { return min(summaryMaxTokens, 4000) }

// TrailTokens is the trail's budget of a summary input: its TrailMaxTokens
// when set (0 when it is negative: no room), else min(MaxTokens, 4000).
func (in SummaryInput) TrailTokens() int {
	if in.TrailMaxTokens != 0 {
		return max(in.TrailMaxTokens, 0)
	}
	return fixedTrailBudget(in.MaxTokens)
}

// trailMax is the SummaryInput.TrailMaxTokens of a trail budget: a budget
// of 0 (trailRoom found no room) is no trail, not the fixed budget an unset
// TrailMaxTokens stands for.
func trailMax(budget int) int {
	if budget <= 0 {
		return -1
	}
	return budget
}

// minProseShare: when the request has less room left than the trail's
// budget (trailAndCap), or the trail folds where the view after the
// summary is over the target anyway (yieldToTrail), the summary's cap
// gives way to the trail, down to 1/minProseShare of summary_max_tokens.
const minProseShare = 4

// trailAndCap returns the trail's budget of a summary and the cap of the
// rest of it (SummaryInput.MaxTokens). The trail takes its budget within
// what the request has left (trailRoom, which reserves the summary's whole
// cap); when that is less, the cap gives the trail what it lacks, down to
// a quarter of the cap: the two together take no more room than before,
// but what the trail cannot hold folds for good (a chained summary merges
// the trail it reads, and a folded line is only counted there), where
// prose is written anew each time. At 8k on the corpus one large latest
// step left a trail 1,092 tokens of its 2,437 once and folded 52 lines
// that never came back (make bench-recall: "behind an older summary").
func (p *planner) trailAndCap() (trail, summaryCap int) {
	budget, room, summaryCap := TrailBudget(p.req.Policy, p.req.Window), p.trailRoom(), p.req.Policy.SummaryMaxTokens
	if short := budget - room; short > 0 {
		give := min(short, summaryCap-summaryCap/minProseShare)
		summaryCap -= give
		room += give
	}
	return min(budget, max(room, 0)), summaryCap
}

// trailRoom is the most the trail of a summary may take and the request
// still fit: the usable window less the fixed part, what stays verbatim
// at the deepest cut (the latest step, the original task, pinned messages,
// what the person said and their tool-pair partners) and the summary's own
// cap; negative when what must stay and the summary's cap are more than
// the usable window. The trail's budget is a share of the window; at a
// small window, with a large latest step, that share can be more than is
// left, and the summary with its trail made the request too large where
// the summary alone fit (8k: 7,272 tokens for 6,964 usable).
func (p *planner) trailRoom() int {
	deep := p.cutBefore(0)
	keep := p.keptBefore(deep)
	var must int64
	for i, m := range p.view {
		if i >= deep || keep[m.ID] {
			must += m.Tokens
		}
	}
	return int(p.req.Usable() - p.req.Fixed - must - int64(p.req.Policy.SummaryMaxTokens))
}

// yieldToTrail is the second giving-way of a summary's cap (the first is
// trailAndCap): the trail's budget and the cap of a summary of head h
// whose trail measured t, given the ones it was measured with. The prose
// yields its cap to the trail, down to 1/minProseShare of
// summary_max_tokens (the trail gains what the cap gives), when t folds
// and what stays verbatim with t alone takes the view after the summary
// over the target, whatever the prose; otherwise both are as given. The
// summary then takes no more room than the cut reserved for it (the cap
// and the trail's budget), and what it holds of that room is exact lines,
// which a chained summary merges and a folded one only counts, rather
// than prose (whose sections, at that cap, the extractive summary leaves
// out: docs/compaction.md). A view within the target stays within it
// (TestSummaryStaysWithinTarget: yielding whenever the trail folded, the
// prose's unused cap filled by the trail took it over, 3,637 tokens for
// 3,400). At 8k on the corpus (make bench-recall, where the view after
// 171 of 174 summaries is over the cache target) commands in view 92.6 →
// 97.3 %, for 1.5 % more on the bill.
func (p *planner) yieldToTrail(h head, t MeasuredTrail, trail, summaryCap int) (int, int) {
	floor := p.req.Policy.SummaryMaxTokens / minProseShare
	if summaryCap <= floor || !p.foldsOverTarget(h, t) {
		return trail, summaryCap
	}
	return trail + summaryCap - floor, floor
}

// foldsOverTarget reports whether t folds and what stays verbatim with t
// alone (the summary's prose aside) takes the view after the summary of h
// over the target: when the summary's room gives way to its trail
// (yieldToTrail, spareToTrail).
func (p *planner) foldsOverTarget(h head, t MeasuredTrail) bool {
	return t.Folds && p.used()-h.before+int64(t.Tokens) > p.target
}
