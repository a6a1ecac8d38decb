package compaction_test

import (
	"testing"

	"github.com/contextd/contextd/internal/compaction"
)

// TestSummaryLeavesRoomForTheTrailItNeeds: the cut leaves room for the
// trail the summarized head needs (Request.TrailSize), not for its whole
// budget (30 % of the usable window, which alone would leave only the
// latest step verbatim), and never more room than the budget.
func TestSummaryLeavesRoomForTheTrailItNeeds(t *testing.T) {
	summarized := func(size func(compaction.SummaryInput) int) (int, int) {
		b := (&builder{}).user("Fix the bug.").steps(80, 400, "c")
		req := request(b, 16_000, compaction.TierSummarize)
		req.TrailSize = size
		plan := mustPlan(t, req)
		for _, it := range plan.Items {
			if it.Tier == compaction.TierSummarize {
				return len(it.Replaced), len(plan.View)
			}
		}
		t.Fatalf("no summary: %+v", plan.Items)
		return 0, 0
	}
	whole, wholeView := summarized(nil)
	small, smallView := summarized(func(compaction.SummaryInput) int { return 50 })
	huge, _ := summarized(func(compaction.SummaryInput) int { return 1 << 30 })
	if small >= whole || smallView <= wholeView {
		t.Errorf("a trail of 50 tokens: %d messages summarized (view %d), with room for the whole budget %d (view %d); want fewer summarized", small, smallView, whole, wholeView)
	}
	if huge != whole {
		t.Errorf("a trail larger than its budget: %d summarized, want %d (room for the budget, no more)", huge, whole)
	}
	if p := compaction.Defaults(16_000); compaction.TrailBudget(p, 16_000) != int(0.35*float64(16_000-p.ReservedOutputTokens)) {
		t.Errorf("trail budget %d, want 35 %% of the usable window", compaction.TrailBudget(p, 16_000))
	}
}
