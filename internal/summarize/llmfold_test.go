package summarize_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
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
// PinFacts skip that section: the previous summary's count and ids were
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
	// What a person wrote is pinned verbatim, a line of it that reads as a
	// fold line too (it is no list entry).
	request := "Go on.\n- folded: 3 earlier entries, in sum_1_1"
	in.Messages = []chat.Message{{ID: "msg_9", Role: chat.RoleUser, Kind: chat.KindNormal, Parts: []chat.Part{{Type: chat.PartText, Text: request}}}}
	if pinned := summarize.PinFacts(answer, in); !strings.Contains(pinned, "(verbatim)\n"+request+"\n") {
		t.Errorf("the latest request is not pinned verbatim:\n%s", pinned)
	}
	// A request that has a section of the name a fold line goes to is
	// pinned as written: the line goes to the answer's section.
	request = "Go on.\n## Decisions\n- keep the old API"
	in.Messages[0].Parts[0].Text = request
	if pinned := summarize.PinFacts("## Current state\nworking", in); !strings.Contains(pinned, "(verbatim)\n"+request+"\n") ||
		!strings.Contains(pinned, "## Decisions\n- folded: 12 earlier entries, in sum_4_1, sum_2_1\n") {
		t.Errorf("the latest request is not pinned verbatim, or the fold line is not in a section of its own:\n%s", pinned)
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

// TestLLMSummaryFoldLinesStayWithinCap: the fold lines an LLM's summary
// carries take their room out of the answer (its last whole lines go),
// not beyond the summary's cap: at a cap of 200 an answer of 195 tokens
// with five lists' fold lines carried took 297 tokens, more than the
// planner left it (the view's bound, TestSummaryOvershootIsBounded, counts
// the cap). Every fold line is kept, and no line of the answer is cut.
func TestLLMSummaryFoldLinesStayWithinCap(t *testing.T) {
	fold := "- folded: 12 earlier entries, in sum_4_1, sum_3_1, sum_2_1\n"
	prev := "[contextd summary, round 4.]\n\n"
	for _, s := range []string{summarize.SecDone, summarize.SecDecisions, summarize.SecErrors, summarize.SecPending} {
		prev += "## " + s + "\n" + fold + "- an entry\n\n"
	}
	prev += "## " + summarize.SecFiles + "\n" + fold // no path to pin (TestLLMSummaryPinsStayWithinCap)
	got := pinnedAtCap(t, prev) + "\n"
	if n := strings.Count(got, strings.TrimPrefix(fold, "- ")); n != 5 {
		t.Errorf("%d fold lines carried, want 5:\n%s", n, got)
	}
}

// TestLLMSummaryFilesFoldGoesWithThePinnedFiles: where the answer has no
// Files section and PinFacts pins the paths it left out, Files' fold line
// goes last in that one Files section, not in a second one of its own.
func TestLLMSummaryFilesFoldGoesWithThePinnedFiles(t *testing.T) {
	prev := "[contextd summary, round 4.]\n\n## Files\n- src/a.py\n- folded: 5 earlier entries, in sum_4_1\n"
	in := compaction.SummaryInput{Round: 5, ID: "sum_5_1", OriginalTask: "Fix the parser bug.", MaxTokens: 800, TrailMaxTokens: -1, Previous: prev}
	got := summarize.PinFacts("## Current state\nworking", in)
	if n := strings.Count(got, "## Files\n"); n != 1 || !strings.Contains(got, "## Files\n- src/a.py\n- folded: 5 earlier entries, in sum_4_1\n") {
		t.Errorf("%d Files sections; want one, the pinned path and then the fold line:\n%s", n, got)
	}
}

// TestLLMSummaryPinsStayWithinCap: the paths PinFacts pins (the previous
// summary's Files the answer left out) take their room out of the answer
// too, within the summary's cap: an answer of 195 tokens of a cap of 200
// with eight paths to pin took 246. No line of the answer is cut, and
// every path is pinned.
func TestLLMSummaryPinsStayWithinCap(t *testing.T) {
	prev := "[contextd summary, round 4.]\n\n## Files\n"
	for i := range 8 {
		prev += fmt.Sprintf("- src/pkg%d/module%d.py\n", i, i)
	}
	got := pinnedAtCap(t, prev)
	for i := range 8 {
		if p := fmt.Sprintf("- src/pkg%d/module%d.py\n", i, i); !strings.Contains(got+"\n", p) {
			t.Errorf("%q not pinned:\n%s", p, got)
		}
	}
}

// pinnedAtCap is PinFacts of an answer of about 195 tokens (len/4) at a
// cap of 200, with prev as the previous summary, after checking that it
// is within the cap and cut no line of the answer.
func pinnedAtCap(t *testing.T, prev string) string {
	t.Helper()
	count := func(s string) int { return len(s) / 4 }
	var answer strings.Builder
	answer.WriteString("## Current state\n")
	for i := 0; count(answer.String()) < 190; i++ {
		fmt.Fprintf(&answer, "- the parser reads clause %d of the grammar\n", i)
	}
	in := compaction.SummaryInput{Round: 5, ID: "sum_5_1", OriginalTask: "Fix the parser bug.", MaxTokens: 200, AskTokens: 800, TrailMaxTokens: -1,
		Count: count, Previous: prev}
	got := strings.TrimSpace(summarize.PinFacts(strings.TrimSpace(answer.String()), in))
	if n := count(got); n > in.MaxTokens {
		t.Errorf("the LLM's summary takes %d tokens, its cap %d:\n%s", n, in.MaxTokens, got)
	}
	for line := range strings.SplitSeq(got, "\n") {
		if strings.HasPrefix(line, "- the parser") && !strings.HasSuffix(line, "of the grammar") {
			t.Errorf("a line of the answer cut: %q", line)
		}
	}
	return got
}
