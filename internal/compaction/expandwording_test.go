package compaction_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
)

// textOf is a message's text and tool output, as the model reads it.
func textOf(m *chat.Message) string {
	var b strings.Builder
	for _, p := range m.Parts {
		b.WriteString(p.Text)
		if p.ToolResult != nil {
			b.WriteString(p.ToolResult.Content)
		}
	}
	return b.String()
}

// With expose_expand_tool every kind of placeholder and summary names the
// id to pass contextd_expand: a pruned tool result and a long message
// their original's, a summary (even one whose summarizer wrote no header,
// as an LLM's) and a drop-middle placeholder their own.
func TestExpandToolWording(t *testing.T) {
	on := func(req *compaction.Request) { req.Policy.ExposeExpandTool = true }

	b := (&builder{}).user("Fix the bug.").steps(12, 2000, "c")
	req := request(b, 8000, compaction.TierPrune)
	on(&req)
	plan := mustPlan(t, req)
	if got := textOf(&plan.View[2]); !strings.Contains(got, `Call contextd_expand with id "m3" to read it.]`) || strings.Contains(got, "ExpandMessage") {
		t.Errorf("pruned tool result: %q", got)
	}

	b = (&builder{}).user("Fix the bug.").user(strings.Repeat("long request ", 600))
	for i := 0; i < 12; i++ {
		b.user(fmt.Sprintf("next %d", i))
	}
	req = request(b, 4000, compaction.TierPrune)
	on(&req)
	plan = mustPlan(t, req)
	if got := textOf(&plan.View[1]); plan.View[1].Kind != chat.KindPlaceholder || !strings.Contains(got, `Call contextd_expand with id "m2" to read them.]`) {
		t.Errorf("head and tail: %s %q", plan.View[1].Kind, got)
	}

	b = (&builder{}).user("Fix the bug.").steps(12, 2000, "c")
	req = request(b, 8000, compaction.TierSummarize)
	on(&req)
	var asked string
	req.Summarize = func(in compaction.SummaryInput) (string, error) { asked = in.ID; return "what happened", nil }
	plan = mustPlan(t, req)
	sum := plan.New[0]
	if want := compaction.SummaryHeader(1, sum.ID, true) + "what happened"; sum.Kind != chat.KindSummary || asked != sum.ID || textOf(&sum) != want ||
		!strings.Contains(want, `call contextd_expand with id "`+sum.ID+`" to read them.]`) {
		t.Errorf("summary %s (summarizer told %q): %q", sum.ID, asked, textOf(&sum))
	}

	b = (&builder{}).user("Fix the bug.")
	for i := 0; i < 8; i++ {
		b.user(fmt.Sprintf("request %d", i)).assistant(strings.Repeat("z", 3600))
	}
	req = request(b, 6000, compaction.TierSummarize, compaction.TierDropMiddle)
	on(&req)
	req.Summarize = func(compaction.SummaryInput) (string, error) { return "", errors.New("summarizer down") }
	plan = mustPlan(t, req)
	ph := plan.New[len(plan.New)-1]
	if got := textOf(&ph); !strings.Contains(got, `Call contextd_expand with id "`+ph.ID+`" to read them.]`) {
		t.Errorf("drop-middle placeholder %s: %q", ph.ID, got)
	}
}

// Without the option, summaries (an LLM's too) and drop-middle
// placeholders name their own id in the ExpandMessage wording, so turning
// the option on later lets the model pass it to contextd_expand.
func TestExpandWordingOffNamesIDs(t *testing.T) {
	b := (&builder{}).user("Fix the bug.").steps(12, 2000, "c")
	req := request(b, 8000, compaction.TierSummarize)
	req.Summarize = func(in compaction.SummaryInput) (string, error) { return "what happened", nil }
	plan := mustPlan(t, req)
	sum := plan.New[0]
	if want := compaction.SummaryHeader(1, sum.ID, false) + "what happened"; sum.Kind != chat.KindSummary || textOf(&sum) != want ||
		!strings.Contains(want, "call ExpandMessage with message id "+sum.ID+" to read them.]") {
		t.Errorf("summary %s: %q", sum.ID, textOf(&sum))
	}

	b = (&builder{}).user("Fix the bug.")
	for i := 0; i < 8; i++ {
		b.user(fmt.Sprintf("request %d", i)).assistant(strings.Repeat("z", 3600))
	}
	req = request(b, 6000, compaction.TierSummarize, compaction.TierDropMiddle)
	req.Summarize = func(compaction.SummaryInput) (string, error) { return "", errors.New("summarizer down") }
	plan = mustPlan(t, req)
	ph := plan.New[len(plan.New)-1]
	if got := textOf(&ph); ph.Kind != chat.KindPlaceholder || !strings.Contains(got, "Call ExpandMessage with message id "+ph.ID+" to read them.]") {
		t.Errorf("drop-middle placeholder %s: %q", ph.ID, got)
	}
}
