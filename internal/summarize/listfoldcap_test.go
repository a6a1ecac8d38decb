package summarize_test

import (
	"fmt"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/summarize"
)

// TestFoldLinesStayWithinCap: at the cap a prose gets once it yielded to
// a folding trail (200 of 800), with a Requested focus line (never
// dropped) and every carried list folding with three ids, the summary
// stays within its cap (the contract of TestSummaryOvershootIsBounded):
// the fold lines name only the newest id when the cap needs it (its
// originals hold the previous summary, whose fold line names the older
// ones, one expand further). Without it the fold lines took the summary
// to 213 tokens of 200.
func TestFoldLinesStayWithinCap(t *testing.T) {
	count := func(s string) int { return len(s) / 4 }
	ids := "sum_11_1, sum_10_1, sum_9_1"
	prev := ""
	for _, s := range []string{summarize.SecDone, summarize.SecDecisions, summarize.SecErrors, summarize.SecPending, summarize.SecFiles} {
		prev += "\n## " + s + "\n- folded: 214 earlier entries, in " + ids + "\n"
	}
	var msgs []chat.Message
	for i := range 30 {
		msgs = append(msgs, chat.Message{ID: fmt.Sprintf("msg_%d", 2*i+40), Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText,
			Text: fmt.Sprintf("The issue is in pkg/x%d/y%d.go, next I need to fix it.", i, i)}}},
			chat.Message{ID: fmt.Sprintf("msg_%d", 2*i+41), Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult,
				ToolResult: &chat.ToolResult{ToolCallID: "c", Content: "error: failed", IsError: true}}}})
	}
	in := compaction.SummaryInput{Round: 12, ID: "sum_12_1", OriginalTask: "Fix it.", MaxTokens: 200, TrailMaxTokens: -1, Count: count, Messages: msgs, Previous: prev,
		Instructions: "Keep every detail of the pytest runs and the ValueError bad value word lines, the clause reader and the grammar."}
	out, err := summarize.Extractive{}.Summarize(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	if n := count(out); n > in.MaxTokens {
		t.Errorf("the summary takes %d tokens, its cap %d:\n%s", n, in.MaxTokens, out)
	}
}
