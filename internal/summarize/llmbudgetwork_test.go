package summarize

import (
	"fmt"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/compaction"
)

// TestAnswerHeldToCapCountsLogarithmically: holding an LLM's answer to
// the cap counts the answer's text a number of times logarithmic in its
// lines, not once a line left out: the answer is as long as
// summary_max_tokens, a tenant's setting, while the cap can be a quarter
// of it, and each count is over the whole text (quadratic: an answer of
// 2,000 lines counted 1,500 times). The lines kept are the same: the most
// whole lines from the start that fit.
func TestAnswerHeldToCapCountsLogarithmically(t *testing.T) {
	var lines []string
	for i := range 2000 {
		lines = append(lines, fmt.Sprintf("- step %04d: fixed the parser in src/calc%04d.py.", i, i))
	}
	answer := strings.Join(lines, "\n") // 2,000 lines of 12 tokens (len/4)
	calls := 0
	count := func(s string) int { calls++; return len(s) / 4 }
	in := compaction.SummaryInput{MaxTokens: 6000, AskTokens: 24000, Count: count}
	got := withinCap(answer, in)
	if n := len(got) / 4; n > 6000 || n < 6000-13 || !strings.HasPrefix(answer, got+"\n") {
		t.Errorf("held to %d tokens, want the first whole lines within 6000", n)
	}
	if calls > 40 {
		t.Errorf("the answer was counted %d times; want at most 40 (log2 of 2,000 lines and a few)", calls)
	}
}
