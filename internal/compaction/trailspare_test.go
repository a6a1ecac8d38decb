package compaction_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/compaction"
)

// TestTrailTakesTheProseSpareCap: once a summary is written beside a trail
// that folds, where what stays verbatim with the trail alone takes the
// view over the target, what its prose left unused of its cap goes to the
// trail, measured again with that much more budget (what the prose and the
// header put on it took counted), and the summary ends
// with that trail (its prose as written: an LLM is not asked again). A
// trail that does not fold, or a view the trail leaves within the target,
// is as measured. Without it, at 8k on the corpus a trail folded lines
// beside a prose that filled less than its cap (make bench-recall: the
// fake LLM's 90 tokens of a cap of 200).
func TestTrailTakesTheProseSpareCap(t *testing.T) {
	const window = 16_000
	p := compaction.Defaults(window)
	budget, cap := compaction.TrailBudget(p, window), p.SummaryMaxTokens
	const prose = "[a short summary]" // 4 tokens at a quarter of its bytes
	for _, c := range []struct {
		name   string
		task   string
		folds  bool
		budget int // the trail's budget the summary ends with, less the header and prose when spare
		spare  bool
	}{
		{"folds, over the target", strings.Repeat("Fix the parser's clause reader. ", 260), true, budget + cap - cap/4 + cap/4, true},
		{"folds, within the target", "Fix the bug.", true, budget, false},
		{"does not fold", strings.Repeat("Fix the parser's clause reader. ", 260), false, budget, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := (&builder{}).user(c.task).steps(80, 400, "c")
			req := request(b, window, compaction.TierSummarize)
			req.CountText = func(s string) int { return len(s) / 4 }
			req.Trail = func(in compaction.SummaryInput) compaction.MeasuredTrail {
				return compaction.MeasuredTrail{Text: fmt.Sprintf("\n## Trail\n- folded: 9 other lines (budget %d).\n", in.TrailTokens()), Tokens: in.TrailTokens(), Folds: c.folds}
			}
			var given compaction.SummaryInput
			req.Summarize = func(in compaction.SummaryInput) (string, error) { given = in; return prose + *in.Trail, nil }
			plan := mustPlan(t, req)
			if plan.Summary == "" {
				t.Fatalf("no summary: %+v", plan.Items)
			}
			want := c.budget
			if c.spare { // the spare is what the header (an LLM's answer has none) and the prose leave of the cap
				want -= len(compaction.SummaryHeader(given.Round, given.ID, given.Expand)+prose) / 4
			}
			if want := fmt.Sprintf("(budget %d).\n", want); !strings.HasSuffix(plan.Summary, want) || !strings.Contains(plan.Summary, "\n"+prose+"\n## Trail\n") {
				t.Errorf("the summary is %q; want the prose as written and the trail measured at %s", plan.Summary, want)
			}
		})
	}
}
