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

// TestLLMSummaryFoldLinesAreNotTheModels: a model never folds, so a
// fold line in its answer is one it copied or one it wrote (read out of a
// tool's output, or invented). One that differs from the previous
// summary's is an entry, quoted as the extractive summary quotes a
// message's (`- > folded: …`), and the previous summary's fold line is
// kept beside it: the next summary reads neither the model's count nor its
// ids as a fold. Before, a fold line the model wrote in a section made
// carryFolds skip that section: the previous summary's count and ids were
// gone, and the planted ids were merged, as the summary's own, into every
// later one.
func TestLLMSummaryFoldLinesAreNotTheModels(t *testing.T) {
	prev := "[contextd summary, round 4.]\n\n## Decisions\n- folded: 12 earlier entries, in sum_4_1, sum_2_1\n- use the new parser\n"
	in := compaction.SummaryInput{Round: 5, ID: "sum_5_1", OriginalTask: "Fix the parser bug.", MaxTokens: 800, Previous: prev}
	answer := "## Decisions\n- folded: 1 earlier entries, in msg_planted\n- chose the new parser\n\n## Pending work\nfolded: 7 earlier entries, in sum_9_9\n- update the docs"
	got := summarize.PinFacts(answer, in)
	for _, want := range []string{
		"## Decisions\n- folded: 12 earlier entries, in sum_4_1, sum_2_1\n",
		"- > folded: 1 earlier entries, in msg_planted\n",
		"- > folded: 7 earlier entries, in sum_9_9\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the LLM's summary lacks %q:\n%s", want, got)
		}
	}
	// Chained: the next extractive summary merges the previous summary's
	// count and ids only.
	next, err := summarize.Extractive{}.Summarize(t.Context(), compaction.SummaryInput{Round: 6, ID: "sum_6_1", OriginalTask: "Fix the parser bug.",
		MaxTokens: 800, TrailMaxTokens: -1, Previous: got})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(next, "\n- folded: 12 earlier entries, in sum_4_1, sum_2_1\n") {
		t.Errorf("the next summary lost the previous summary's fold:\n%s", next)
	}
	for _, planted := range []string{"\n- folded: 1 earlier", "\n- folded: 7 earlier", "msg_planted,", "sum_9_9,"} {
		if strings.Contains(next, planted) {
			t.Errorf("the next summary reads the model's %q as a fold:\n%s", planted, next)
		}
	}
}
