package summarize_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/summarize"
)

// TestSqueezedTrailComesBack: a trail squeezed to a small budget folds most
// of its commands, and keeps them whole beside the summary
// (MeasuredTrail.Folded, never in its text); the next summary, with its
// whole budget, reads them back (SummaryInput.PreviousFolded) and shows
// every one of them again, its fold line counting none. Before, a chained
// summary had only the fold line's count: what one squeeze folded was
// never shown again.
func TestSqueezedTrailComesBack(t *testing.T) {
	_, next := squeezedThenRoom(t)
	m2 := summarize.MeasureTrail(next)
	for i := range 40 {
		if cmd := fmt.Sprintf("grep -n pattern%d src/module%d/file.py", i, i); !strings.Contains(m2.Text, cmd+"\n") && !strings.Contains(m2.Text, cmd+" — ") {
			t.Errorf("the next trail lacks %q", cmd)
		}
	}
	if strings.Contains(m2.Text, "- folded: ") || m2.Folded != "" || m2.Folds {
		t.Errorf("the next trail, with room, still folds:\n%s\nfolded:\n%s", m2.Text, m2.Folded)
	}
	// Without what the squeezed one folded, its lines stay a count.
	next.PreviousFolded = ""
	if m := summarize.MeasureTrail(next); !strings.Contains(m.Text, "- folded: ") {
		t.Errorf("without PreviousFolded the trail shows what it cannot know:\n%s", m.Text)
	}
}

// TestTrailLeavesOutWhatTheViewShowsAgain: a command the kept tail runs
// again, and an error it prints again, are not on the trail (the view holds
// them verbatim; the next trail reads them there once they are summarized),
// while a file's change stays and what the tail does not show stays.
func TestTrailLeavesOutWhatTheViewShowsAgain(t *testing.T) {
	msgs := []chat.Message{
		trailCall("msg_2", "Bash", `{"command":"pytest tests/test_a.py"}`), trailResult("msg_3", "msg_2", "E   ValueError: bad input\n<returncode>1</returncode>"),
		trailCall("msg_4", "Edit", `{"file_path":"/repo/a.py","old_string":"x","new_string":"y"}`), trailResult("msg_5", "msg_4", "ok"),
		trailCall("msg_6", "Bash", `{"command":"ls src"}`), trailResult("msg_7", "msg_6", "a.py"),
	}
	kept := []chat.Message{
		trailCall("msg_8", "Bash", `{"command":"pytest tests/test_a.py"}`), trailResult("msg_9", "msg_8", "E   ValueError: bad input\n<returncode>1</returncode>"),
		trailCall("msg_10", "Edit", `{"file_path":"/repo/a.py","old_string":"y","new_string":"z"}`), trailResult("msg_11", "msg_10", "ok"),
	}
	in := compaction.SummaryInput{Round: 1, ID: "sum_1_1", MaxTokens: 800, TrailMaxTokens: 2000, Count: trailCount, Messages: msgs, Kept: kept}
	got := summarize.MeasureTrail(in).Text
	for _, gone := range []string{"pytest tests/test_a.py", "ValueError: bad input"} {
		if strings.Contains(got, gone) {
			t.Errorf("the trail repeats %q, which the view keeps:\n%s", gone, got)
		}
	}
	for _, stays := range []string{"- edited: /repo/a.py — msg_4", "ls src"} {
		if !strings.Contains(got, stays) {
			t.Errorf("the trail lacks %q:\n%s", stays, got)
		}
	}
	// What it leaves out is kept beside it (Folded) but is not folded:
	// more room would show nothing more (compaction's yieldToTrail).
	if m := summarize.MeasureTrail(in); m.Folded == "" || m.Folds {
		t.Errorf("left out as shown again: Folded %q, Folds %v; want the lines and no fold", m.Folded, m.Folds)
	}
	in.Kept = nil
	if got := summarize.MeasureTrail(in).Text; !strings.Contains(got, "pytest tests/test_a.py") {
		t.Errorf("without what the view keeps, the trail lacks the command:\n%s", got)
	}
}

// TestShownAgainComesBackWhenTheViewLosesIt: what a trail leaves out
// because the messages the view keeps show it again is kept whole beside
// the summary (MeasuredTrail.Folded), so that once those messages leave
// the view without being summarized (drop_middle drops whole turns after a
// summary; masking keeps only the first error lines of an output), the
// next summary shows it again. Before, the line was in neither the view
// nor any later trail: the command and the error its head ran and printed
// were lost from view for good.
func TestShownAgainComesBackWhenTheViewLosesIt(t *testing.T) {
	msgs := []chat.Message{
		trailCall("msg_2", "Bash", `{"command":"pytest tests/test_a.py"}`), trailResult("msg_3", "msg_2", "E   ValueError: bad input\n<returncode>1</returncode>"),
		trailCall("msg_6", "Bash", `{"command":"ls src"}`), trailResult("msg_7", "msg_6", "a.py"),
	}
	kept := []chat.Message{
		trailCall("msg_8", "Bash", `{"command":"pytest tests/test_a.py"}`), trailResult("msg_9", "msg_8", "E   ValueError: bad input\n<returncode>1</returncode>"),
	}
	first := compaction.SummaryInput{Round: 1, ID: "sum_1_1", MaxTokens: 800, TrailMaxTokens: 2000, Count: trailCount, Messages: msgs, Kept: kept}
	m1 := summarize.MeasureTrail(first)
	if strings.Contains(m1.Text, "pytest tests/test_a.py") {
		t.Fatalf("the trail shows %q, which the view keeps:\n%s", "pytest tests/test_a.py", m1.Text)
	}
	if !strings.Contains(m1.Folded, "pytest tests/test_a.py") || !strings.Contains(m1.Folded, "ValueError: bad input") {
		t.Errorf("the lines the view shows again are not kept beside the summary:\n%s", m1.Folded)
	}
	first.Trail = &m1.Text
	s1, err := summarize.Extractive{}.Summarize(t.Context(), first)
	if err != nil {
		t.Fatal(err)
	}
	// The kept turn was dropped to fit (drop_middle), then summarized as
	// the placeholder that stands for it.
	dropped := chat.Message{ID: "ph_2_1", Role: chat.RoleUser, Kind: chat.KindPlaceholder, Parts: []chat.Part{{Type: chat.PartText,
		Text: "[contextd dropped 2 messages (80 tokens) here so the request fits the window. Call ExpandMessage with message id ph_2_1 to read them.]"}}}
	next := compaction.SummaryInput{Round: 2, ID: "sum_2_1", MaxTokens: 800, TrailMaxTokens: 2000, Count: trailCount, Previous: s1, PreviousFolded: m1.Folded,
		Messages: []chat.Message{dropped, trailCall("msg_90", "Bash", `{"command":"make lint"}`), trailResult("msg_91", "msg_90", "ok")}}
	m2 := summarize.MeasureTrail(next)
	for _, want := range []string{"pytest tests/test_a.py", "ValueError: bad input", "ls src", "make lint"} {
		if !strings.Contains(m2.Text, want) {
			t.Errorf("the next trail lacks %q:\n%s", want, m2.Text)
		}
	}
	if strings.Contains(m2.Text, "- folded: ") {
		t.Errorf("the next trail, with room, folds:\n%s", m2.Text)
	}
}

// TestFoldedLinesAreBounded: what a summary keeps beside it, its folded
// lines and those the view showed again together, is at most
// compaction.MaxFoldedBytes, the newest kept.
func TestFoldedLinesAreBounded(t *testing.T) {
	var msgs, kept []chat.Message
	for i := range 400 {
		cmd := fmt.Sprintf(`{"command":"grep -rn pattern%03d src/%s"}`, i, strings.Repeat("d", 80))
		msgs = append(msgs, trailCall(fmt.Sprintf("msg_%d", 2*i+2), "Bash", cmd), trailResult(fmt.Sprintf("msg_%d", 2*i+3), fmt.Sprintf("msg_%d", 2*i+2), "no match"))
		kept = append(kept, trailCall(fmt.Sprintf("msg_%d", 2*i+1002), "Bash", cmd), trailResult(fmt.Sprintf("msg_%d", 2*i+1003), fmt.Sprintf("msg_%d", 2*i+1002), "no match"))
	}
	in := compaction.SummaryInput{Round: 1, ID: "sum_1_1", MaxTokens: 800, TrailMaxTokens: 2000, Count: trailCount, Messages: msgs, Kept: kept}
	m := summarize.MeasureTrail(in)
	if len(m.Folded) > compaction.MaxFoldedBytes || !strings.Contains(m.Folded, "pattern399") || strings.Contains(m.Folded, "pattern000") {
		t.Errorf("%d bytes kept beside the summary (at most %d, the newest first):\n%.300s", len(m.Folded), compaction.MaxFoldedBytes, m.Folded)
	}
}

// TestRestoredDenseLinesNameTheirOwnID: a line placed again from what the
// previous summary folded (PreviousFolded) and shown dense is listed under
// a head that names its own id (the message it came from), not the new
// summary's: the new summary's originals hold the previous summary, whose
// text only counted it. Named by the new summary's id, such a line was two
// expands away once a later trail folded it again (make bench-recall at
// 8k: 9 probes "lost", beyond one expand). A line the previous summary's
// text showed is still listed under the new summary's id.
func TestRestoredDenseLinesNameTheirOwnID(t *testing.T) {
	s1, next := squeezedThenRoom(t)
	m2 := summarize.MeasureTrail(next)
	head, dense := "", 0
	for line := range strings.SplitSeq(m2.Text, "\n") {
		if strings.HasPrefix(line, "- ") {
			head = line
			continue
		}
		cmd, ok := strings.CutPrefix(line, "grep -n pattern")
		if !ok {
			continue
		}
		dense++
		n, _, _ := strings.Cut(cmd, " ")
		i, err := strconv.Atoi(n)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		inText, call := strings.Contains(s1, line+"\n"), fmt.Sprintf("msg_%d", 2*i+2)
		switch {
		case inText && !strings.Contains(head, "(behind sum_2_1)"):
			t.Errorf("%q, shown by the previous summary's text, is under %q; want the new summary's id", line, head)
		case !inText && !strings.Contains(head, "(behind "+call+")"):
			t.Errorf("%q, placed again from what the previous summary folded, is under %q; want its own id %s", line, head, call)
		}
	}
	if dense == 0 {
		t.Fatalf("no command is shown dense; the case was meant to show them so:\n%s", m2.Text)
	}
}

// squeezedThenRoom is a first summary of 40 commands whose trail, squeezed
// to 150 tokens, folds most of them (its text), and
// the input of the next summary, with room for them all and what the first
// folded.
func squeezedThenRoom(t *testing.T) (string, compaction.SummaryInput) {
	t.Helper()
	var msgs []chat.Message
	for i := range 40 {
		id, res := fmt.Sprintf("msg_%d", 2*i+2), fmt.Sprintf("msg_%d", 2*i+3)
		msgs = append(msgs, trailCall(id, "Bash", fmt.Sprintf(`{"command":"grep -n pattern%d src/module%d/file.py"}`, i, i)), trailResult(res, id, "no match"))
	}
	squeezed := compaction.SummaryInput{Round: 1, ID: "sum_1_1", MaxTokens: 200, TrailMaxTokens: 150, Count: trailCount, Messages: msgs}
	m1 := summarize.MeasureTrail(squeezed)
	if !strings.Contains(m1.Text, "- folded: ") || m1.Folded == "" || !m1.Folds || strings.Contains(m1.Text, m1.Folded) {
		t.Fatalf("the squeezed trail folds nothing or shows what it folded:\n%s\nfolded:\n%s", m1.Text, m1.Folded)
	}
	squeezed.Trail = &m1.Text
	s1, err := summarize.Extractive{}.Summarize(t.Context(), squeezed)
	if err != nil {
		t.Fatal(err)
	}
	next := compaction.SummaryInput{Round: 2, ID: "sum_2_1", MaxTokens: 800, TrailMaxTokens: 4000, Count: trailCount, Previous: s1, PreviousFolded: m1.Folded,
		Messages: []chat.Message{trailCall("msg_90", "Bash", `{"command":"make lint"}`), trailResult("msg_91", "msg_90", "ok")}}
	return s1, next
}
