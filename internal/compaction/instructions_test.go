package compaction_test

import (
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
)

// TestHumanMessagesKept: what the person typed stays verbatim through
// summarize and drop-middle, within keep_human_tokens (newest first; the
// oldest long one beyond it is summarized); standing instructions are kept
// whatever their size; a client's scaffolding is summarized like the rest.
func TestHumanMessagesKept(t *testing.T) {
	b := (&builder{}).user("<environment_context>\n<cwd>/w</cwd>\n</environment_context>"). // m1: scaffolding, the "task" id
												user("Rename foo to bar everywhere; keep the public API.").            // m2
												user("<user_instructions>\nAlways run go vet.\n</user_instructions>"). // m3: standing
												steps(4, 2000, "a").
												user("Also, "+strings.Repeat("the old name is used in the docs ", 30)+"fix them."). // m12: long
												steps(4, 2000, "b").
												user("Don't touch the vendor directory.") // m21
	b.steps(2, 200, "c")
	for _, c := range []struct {
		name  string
		human int64
		kept  []string // ids verbatim after
		gone  []string
	}{
		{"default budget", -1, []string{"m2", "m3", "m12", "m21"}, nil},
		{"budget for the short ones", 40, []string{"m2", "m3", "m21"}, []string{"m12"}},
		{"no budget", 0, []string{"m3", "m21"}, []string{"m2", "m12"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := request(b, 8000, compaction.TierSummarize)
			if c.human >= 0 {
				req.Policy.KeepHumanTokens = c.human
			}
			plan := mustPlan(t, req)
			if !plan.Changed() || plan.Tiers[0] != compaction.TierSummarize {
				t.Fatalf("want a summary: tiers %v", plan.Tiers)
			}
			at := map[string]chat.Message{}
			for _, m := range plan.View {
				at[m.ID] = m
			}
			for _, id := range c.kept {
				if _, ok := at[id]; !ok {
					t.Errorf("%s was not kept verbatim: view %s", id, ids(plan.View))
				}
			}
			for _, id := range c.gone {
				if _, ok := at[id]; ok {
					t.Errorf("%s was kept beyond the budget: view %s", id, ids(plan.View))
				}
			}
		})
	}
	// Drop-middle keeps the person's messages and drops the steps after them.
	req := request(b, 8000, compaction.TierDropMiddle)
	req.Policy.ReservedOutputTokens = 8000 - 3000
	plan := mustPlan(t, req)
	for _, id := range []string{"m2", "m3", "m12", "m21"} {
		if !strings.Contains(" "+ids(plan.View)+" ", " "+id+" ") {
			t.Errorf("drop-middle dropped %s: view %s", id, ids(plan.View))
		}
	}
}

func TestKeepHumanTokensPolicy(t *testing.T) {
	p, err := compaction.Resolve("policy", compaction.Overrides{}, 100_000)
	if err != nil || p.KeepHumanTokens != 85_000/4 {
		t.Errorf("default keep_human_tokens = %d, %v; want a quarter of the usable window", p.KeepHumanTokens, err)
	}
	reserved := int64(20_000)
	if p, _ := compaction.Resolve("policy", compaction.Overrides{ReservedOutputTokens: &reserved}, 100_000); p.KeepHumanTokens != 20_000 {
		t.Errorf("keep_human_tokens = %d with 20k reserved, want 20000", p.KeepHumanTokens)
	}
	neg := int64(-1)
	if _, err := compaction.Resolve("policy", compaction.Overrides{KeepHumanTokens: &neg}, 100_000); err == nil || !strings.Contains(err.Error(), "policy.keep_human_tokens") {
		t.Errorf("a negative budget: %v", err)
	}
}
