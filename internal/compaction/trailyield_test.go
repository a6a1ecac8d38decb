package compaction_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/compaction"
)

// TestProseYieldsToAFoldingTrail: when the trail folds and what stays
// verbatim with the trail alone takes the view after the summary over the
// target, the summary's cap gives way to the trail, down to a quarter
// (the two take the room the cut reserved, no more); a trail that does
// not fold, or a view the trail leaves within the target, keeps the cap.
// Without it the summary was written at its whole cap beside a trail
// that folded (at 8k on the corpus 92.6 % of the commands in view); and
// the summary is written with the trail measured again at the budget it
// gained (without that, the budget grew and the trail did not). An LLM
// summarizer is still asked for summary_max_tokens (AskTokens).
func TestProseYieldsToAFoldingTrail(t *testing.T) {
	const window = 16_000
	p := compaction.Defaults(window)
	budget, cap := compaction.TrailBudget(p, window), p.SummaryMaxTokens
	for _, c := range []struct {
		name        string
		task        string
		folds       bool
		cap, budget int
	}{
		{"folds, over the target", strings.Repeat("Fix the parser's clause reader. ", 260), true, cap / 4, budget + cap - cap/4},
		{"folds, within the target", "Fix the bug.", true, cap, budget},
		{"does not fold", strings.Repeat("Fix the parser's clause reader. ", 260), false, cap, budget},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := (&builder{}).user(c.task).steps(80, 400, "c")
			req := request(b, window, compaction.TierSummarize)
			req.Trail = func(in compaction.SummaryInput) compaction.MeasuredTrail {
				// The text names the budget it was measured with.
				return compaction.MeasuredTrail{Text: fmt.Sprintf("\n## Trail\n- folded: 9 other lines (budget %d).\n", in.TrailTokens()), Tokens: in.TrailTokens(), Folds: c.folds}
			}
			var got compaction.SummaryInput
			summarize := req.Summarize
			req.Summarize = func(in compaction.SummaryInput) (string, error) {
				got = in
				return summarize(in)
			}
			if plan := mustPlan(t, req); plan.Summary == "" {
				t.Fatalf("no summary: %+v", plan.Items)
			}
			if got.MaxTokens != c.cap || got.TrailMaxTokens != c.budget {
				t.Errorf("cap %d and trail %d; want %d and %d", got.MaxTokens, got.TrailMaxTokens, c.cap, c.budget)
			}
			// An LLM is still asked for summary_max_tokens (a reasoning
			// model counts its reasoning in it), its answer held to the cap.
			if got.AskTokens != p.SummaryMaxTokens {
				t.Errorf("an LLM is asked for %d tokens; want summary_max_tokens, %d", got.AskTokens, p.SummaryMaxTokens)
			}
			// The summary is written with the trail measured at the budget
			// it gained, not the one measured before the prose yielded.
			if want := fmt.Sprintf("(budget %d)", c.budget); got.Trail == nil || !strings.Contains(*got.Trail, want) {
				trail := "(none)"
				if got.Trail != nil {
					trail = *got.Trail
				}
				t.Errorf("the summary's trail is not the one measured at its budget %s: %s", want, trail)
			}
		})
	}
}
