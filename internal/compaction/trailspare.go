package compaction

import "strings"

// spareToTrail is the third giving-way of a summary's room to its trail
// (after trailAndCap and yieldToTrail): once the summary is written, what
// its prose left unused of its cap goes to a trail that folds, measured
// again with its budget plus that spare, when what stays verbatim with the
// trail alone takes the view after the summary over the target (as
// yieldToTrail asks). It returns the summary with the larger trail and
// that trail, or false when nothing changes. The prose (with its header,
// which an LLM's answer is given before this) is kept as written
// (an LLM's is not asked again); the two together take no more than the
// cap and the trail's budget the cut reserved, so the view's bound holds
// (TestSummaryOvershootIsBounded). Once the prose yielded, the extractive
// summary's sections take a sixteenth of summary_max_tokens and an LLM's
// answer what it writes (the bench's fake, about 90 tokens) of a cap of a
// quarter: at 8k on the corpus the rest held lines the trail folded
// (TestTrailTakesTheProseSpareCap).
func (p *planner) spareToTrail(h head, text string, t MeasuredTrail, in SummaryInput) (string, MeasuredTrail, bool) {
	if t.Text == "" || p.req.CountText == nil || p.req.Trail == nil || !strings.HasSuffix(text, t.Text) || !p.foldsOverTarget(h, t) {
		return text, t, false
	}
	prose := text[:len(text)-len(t.Text)]
	spare := in.MaxTokens - p.req.CountText(prose)
	if spare <= 0 {
		return text, t, false
	}
	in.Trail, in.TrailMaxTokens = nil, in.TrailTokens()+spare
	more := p.req.Trail(in)
	if more.Tokens <= t.Tokens || more.Tokens > in.TrailMaxTokens || more.Text == "" {
		return text, t, false
	}
	return prose + more.Text, more, true
}
