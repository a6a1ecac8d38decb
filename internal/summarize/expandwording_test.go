package summarize_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/summarize"
)

// A summary's header, its trail's title and its fold line say what the
// model reading them can do (compaction.Expander): on the gateway with the
// tool off, nothing it cannot call; the ids stay named (issue 29).
func TestSummaryWordingOfEachSurface(t *testing.T) {
	var many []chat.Message
	for i := range 200 {
		many = append(many, trailCall(fmt.Sprintf("msg_%d", 100+2*i), "Bash", fmt.Sprintf(`{"command":"make step%02d"}`, i)))
		many = append(many, trailResult(fmt.Sprintf("msg_%d", 101+2*i), fmt.Sprintf("msg_%d", 100+2*i), "exit code: 0"))
	}
	for _, c := range []struct {
		e          compaction.Expander
		fold, head string
	}{
		{compaction.ExpandByRPC, ". Call ExpandMessage with message id sum_3_1 to read what they came from.\n", "; expand an id to read one)\n"},
		{compaction.ExpandByTool, `. Call contextd_expand with id "sum_3_1" to read what they came from.` + "\n", "; expand an id to read one)\n"},
		{compaction.ExpandByNone, ". Id sum_3_1 holds what they came from.\n", "; the ids name what they came from)\n"},
	} {
		s, err := summarize.Extractive{}.Summarize(t.Context(), compaction.SummaryInput{Round: 3, ID: "sum_3_1", MaxTokens: 400, Count: trailCount, Messages: many, Expand: c.e})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(s, compaction.SummaryHeader(3, "sum_3_1", c.e)) || !strings.Contains(s, c.fold) || !strings.Contains(s, c.head) {
			t.Errorf("wording %d: want the header, %q and %q:\n%s", c.e, c.fold, c.head, s)
		}
		if c.e == compaction.ExpandByNone && (strings.Contains(s, "xpand") || strings.Contains(s, "Call ")) {
			t.Errorf("tells a model that can call nothing to expand:\n%s", s)
		}
	}
}
