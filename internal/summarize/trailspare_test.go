package summarize_test

import (
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/summarize"
)

// TestSpareTrailStaysWithinCapAndBudget: where the trail takes what the
// prose left of its cap (the planner's spareToTrail, after the summarizer
// answered), the summary the plan holds, its header included, takes no
// more than the cap and the trail's budget the summarizer was given, with
// the extractive summary and with an LLM's short answer (PinFacts), at the
// windows and sessions of TestSummaryOvershootIsBounded. The check there
// reads the summarizer's answer, before the trail grew.
func TestSpareTrailStaysWithinCapAndBudget(t *testing.T) {
	grew := 0
	for _, llm := range []bool{false, true} {
		for _, w := range []int64{6000, 8192, 12288} {
			for _, steps := range []int{25, 200} {
				for _, task := range []int64{0, 25} {
					msgs := smallWindowSession(w-w*15/100-100, steps, task, 0)
					req := extractiveRequest(t, msgs, w)
					req.Policy.ReservedOutputTokens = w * 15 / 100
					var given compaction.SummaryInput
					var answer string
					req.Summarize = func(in compaction.SummaryInput) (string, error) {
						given = in
						var err error
						if llm {
							answer = summarize.PinFacts("## Current state\nThe parser's clause reader is being rewritten.", in)
						} else {
							answer, err = summarize.Extractive{}.Summarize(t.Context(), in)
						}
						return answer, err
					}
					plan, err := compaction.PlanCompaction(req)
					if err != nil {
						t.Fatal(err)
					}
					if plan.Summary == "" {
						continue
					}
					text := plan.Summary
					if !strings.HasSuffix(answer, text) && !strings.HasSuffix(text, answer) {
						grew++
					}
					if n, most := quarterText(text), given.MaxTokens+given.TrailTokens()+1; n > most {
						t.Errorf("llm %v, window %d, %d steps, task %d %%: the summary takes %d tokens, its cap %d and trail budget %d",
							llm, w, steps, task, n, given.MaxTokens, given.TrailTokens())
					}
				}
			}
		}
	}
	if grew == 0 {
		t.Errorf("no trail took the prose's spare cap; the cases were meant to have some")
	}
	t.Logf("%d summaries with a trail grown", grew)
}
