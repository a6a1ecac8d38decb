package summarize_test

import (
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/summarize"
)

// TestLLMSummaryCarriesListFolds: an LLM's summary of a conversation whose
// previous summary folded entries of its lists keeps those fold lines (the
// count and the ids whose originals hold the entries): first in a section
// the answer has, last in Files, in a section of their own where the
// answer has none, once where the model kept one itself. Before, a model
// that rewrote its sections left them out, and the entries they counted
// were no longer named anywhere in the view.
func TestLLMSummaryCarriesListFolds(t *testing.T) {
	prev := "[contextd summary, round 4.]\n\n## Decisions\n- folded: 12 earlier entries, in sum_4_1, sum_2_1\n- use the new parser\n\n" +
		"## Errors and resolutions\n- folded: 2 earlier entries, in sum_4_1\n- ValueError: bad value\n\n" +
		"## Pending work\n- folded: 3 earlier entries, in sum_3_1\n- update the docs\n\n## Files\n- src/a.py\n- folded: 5 earlier entries, in sum_4_1\n"
	in := compaction.SummaryInput{Round: 5, ID: "sum_5_1", OriginalTask: "Fix the parser bug.", MaxTokens: 800, Previous: prev}
	answer := "## Decisions\n- chose the new parser\n\n## Errors and resolutions\n- folded: 2 earlier entries, in sum_4_1\n- fixed it\n\n## Files\n- src/a.py\n- src/b.py\n\n## Current state\nworking"
	got := summarize.PinFacts(answer, in)
	for _, want := range []string{
		"## Decisions\n- folded: 12 earlier entries, in sum_4_1, sum_2_1\n- chose the new parser\n",
		"## Errors and resolutions\n- folded: 2 earlier entries, in sum_4_1\n- fixed it\n",
		"## Files\n- src/a.py\n- src/b.py\n- folded: 5 earlier entries, in sum_4_1\n",
		"## Pending work\n- folded: 3 earlier entries, in sum_3_1",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the LLM's summary lacks %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "folded: 2 earlier entries"); n != 1 {
		t.Errorf("the fold line the model kept is there %d times:\n%s", n, got)
	}
}
