package summarize_test

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/summarize"
)

func msgs() []chat.Message {
	call := func(id, cmd string) chat.Message {
		return chat.Message{Role: chat.RoleAssistant, Parts: []chat.Part{
			{Type: chat.PartText, Text: "The issue is in the parser. I'll run the tests next."},
			{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: id, Name: "bash", Arguments: `{"command":"` + cmd + `"}`}}}}
	}
	result := func(id, out string) chat.Message {
		return chat.Message{Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: id, Content: out}}}}
	}
	return []chat.Message{
		call("a", "cat src/parser.py"), result("a", "def parse(): ..."),
		call("b", "pytest tests/test_parser.py"), result("b", "E   AssertionError: expected 3\nFAILED tests/test_parser.py::test_x"),
		{Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText, Text: "Fixed the off-by-one. Next I need to update the docs."}}},
	}
}

func TestExtractive(t *testing.T) {
	count := func(s string) int { return len(s) / 4 }
	in := compaction.SummaryInput{Round: 2, OriginalTask: "Fix the parser bug.", Messages: msgs(), MaxTokens: 800, Count: count,
		Previous: "## Completed work\n- `bash`: ls\n\n## Decisions\n- use the new API\n"}
	out, err := summarize.Extractive{}.Summarize(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"round 2", "## Original task\n(the conversation's first user message, kept verbatim in the view)", "## Completed work", "- ran: cat src/parser.py", "## Trail",
		"src/parser.py", "tests/test_parser.py", "## Decisions", "use the new API", "The issue is in the parser.",
		"## Errors and resolutions", "AssertionError: expected 3 → Fixed the off-by-one.", "## Current state",
		"## Pending work", "Next I need to update the docs.", "`bash`: ls"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	again, _ := summarize.Extractive{}.Summarize(t.Context(), in)
	if again != out {
		t.Error("the extractive summary is not deterministic")
	}
	in.MaxTokens = 60
	short, _ := summarize.Extractive{}.Summarize(t.Context(), in)
	if count(short) > 60 && count(short) >= count(out) {
		t.Errorf("cap not applied: %d tokens", count(short))
	}
	if !strings.Contains(short, "## Original task") {
		t.Errorf("capped summary lost its sections:\n%s", short)
	}
}

func TestHandoff(t *testing.T) {
	view := append([]chat.Message{{ID: "m1", Role: chat.RoleUser, Kind: chat.KindNormal, Parts: []chat.Part{{Type: chat.PartText, Text: "Fix the parser bug."}}}}, msgs()...)
	for i := range view {
		if view[i].Kind == "" {
			view[i].Kind = chat.KindNormal
		}
	}
	doc := summarize.Handoff(view, "")
	for _, want := range []string{"## ORIGINAL TASK\nFix the parser bug.", "## CURRENT", "## DONE", "## IN_PROGRESS", "## NEXT",
		"update the docs", "## FILES", "- src/parser.py", "## ISSUES", "AssertionError"} {
		if !strings.Contains(doc, want) {
			t.Errorf("hand-off lacks %q:\n%s", want, doc)
		}
	}
}

// TestHandoffNamesWhatAPersonWrote: the hand-off's CURRENT is the latest
// request a person wrote, not a framework's observation sent as user text
// (mini-swe-agent's <returncode>), as PinFacts keeps it.
func TestHandoffNamesWhatAPersonWrote(t *testing.T) {
	user := func(text string) chat.Message {
		return chat.Message{Role: chat.RoleUser, Kind: chat.KindNormal, Parts: []chat.Part{{Type: chat.PartText, Text: text}}}
	}
	view := []chat.Message{
		user("Fix the parser bug."),
		user("Also keep the old API working."),
		{Role: chat.RoleAssistant, Kind: chat.KindNormal, Parts: []chat.Part{{Type: chat.PartText, Text: "```bash\ngrep -n parse src/parser.py\n```"}}},
		user("<returncode>0</returncode>\n<output>\n12:def parse(s):\n</output>"),
	}
	doc := summarize.Handoff(view, "")
	if !strings.Contains(doc, "## CURRENT\nLatest request: Also keep the old API working.") {
		t.Errorf("want the person's request as CURRENT, not the observation:\n%s", doc)
	}
}

// TestFilesSection: the summary lists the paths the assistant wrote (text
// and tool-call arguments), most recently mentioned first, after them those
// an earlier round carried (also from the legacy "files touched" bullet);
// tool output's paths and bare names of listed paths are left out; the list
// stays within half the cap, dropping the least recently mentioned.
func TestFilesSection(t *testing.T) {
	count := func(s string) int { return len(s) / 4 }
	say := func(text string, calls ...string) chat.Message {
		m := chat.Message{Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText, Text: text}}}
		for i, c := range calls {
			m.Parts = append(m.Parts, chat.Part{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: fmt.Sprint(i), Name: "bash", Arguments: c}})
		}
		return m
	}
	tool := chat.Message{Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: "0", Content: "lib/listed_only.py\nlib/other.py"}}}}
	harness := chat.Message{Role: chat.RoleUser, Parts: []chat.Part{{Type: chat.PartText, Text: "<output>docs/printed.md</output>"}}}
	in := compaction.SummaryInput{Round: 3, OriginalTask: "Fix it.", MaxTokens: 800, Count: count,
		Previous: "## Completed work\n- files touched: old/legacy.py\n\n## Files\n- old/carried.go\n",
		Messages: []chat.Message{
			say("I'll read src/a.py first.", `{"command":"cat src/a.py src/b.py"}`), tool, harness,
			say("The bug is in src/b.py, also named b.py."),
		}}
	out, err := summarize.Extractive{}.Summarize(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	_, files, ok := strings.Cut(out, "## Files\n")
	files, _, _ = strings.Cut(files, "\n\n## ") // the trail follows
	files += "\n"
	if !ok {
		t.Fatalf("no files section:\n%s", out)
	}
	// src/b.py and src/a.py are in the trail (read by cat): Files does not
	// repeat them.
	if want := "- old/carried.go\n- old/legacy.py\n"; !strings.HasPrefix(files, want) || len(files) != len(want) {
		t.Errorf("files section %q, want %q", files, want)
	}
	if strings.Contains(out, "files touched") {
		t.Errorf("the legacy bullet stayed:\n%s", out)
	}

	// Over the budget: the newest paths stay, within half the cap.
	var many []chat.Message
	for i := range 200 {
		many = append(many, say(fmt.Sprintf("Now pkg/module%03d/file.go.", i)))
	}
	in.Messages, in.MaxTokens = many, 400
	out, _ = summarize.Extractive{}.Summarize(t.Context(), in)
	_, files, _ = strings.Cut(out, "## Files\n")
	files, _, _ = strings.Cut(files, "\n## ")
	if count(files) > 200 || !strings.HasPrefix(files, "- pkg/module199/file.go\n- pkg/module198/file.go\n") {
		t.Errorf("files over budget (%d tokens) or not newest first:\n%s", count(files), files)
	}
	if strings.Contains(files, "pkg/module000/") || strings.Contains(files, "old/carried.go") {
		t.Errorf("the oldest paths should be the ones dropped:\n%s", files)
	}
}

// TestPinFactsFiles: an LLM summary that left out a written path gets it
// appended under the files section; one it kept, or the trail names, is
// not repeated.
func TestPinFactsFiles(t *testing.T) {
	in := compaction.SummaryInput{OriginalTask: "Fix the parser bug.", Messages: msgs(), MaxTokens: 800}
	got := summarize.PinFacts("Fix the parser bug. Looked at src/parser.py.", in)
	got, _, _ = strings.Cut(got, "\n## "+summarize.SecTrail+"\n") // the trail lists every file again
	if strings.Contains(got, "## Files") || strings.Count(got, "src/parser.py") != 1 {
		t.Errorf("pinned files the trail names:\n%s", got)
	}
	// A file the previous (LLM) summary named in its prose, dropped by this
	// round's LLM, comes back.
	in.Previous = "## Completed work\nRefactored lib/tokens.go and lib/util.py.\n## Files\n- docs/a.md\n"
	got = summarize.PinFacts("Fix the parser bug. Looked at src/parser.py and lib/util.py.", in)
	_, files, _ := strings.Cut(got, "## Files\n")
	files, _, _ = strings.Cut(files, "\n\n## ")
	if files != "- docs/a.md\n- lib/tokens.go" { // tests/test_parser.py is in the trail
		t.Errorf("pinned files %q", files)
	}
}

// TestFilesKeepAPathInsideALongerOne: a path the trail names only inside a
// longer path (lib/x.py in lib/x.py.orig, x.py in lib/x.py) is not in the
// trail, and Files lists it; before the whole-path measure it was dropped,
// named nowhere in the summary.
func TestFilesKeepAPathInsideALongerOne(t *testing.T) {
	count := func(s string) int { return len(s) / 4 }
	call := chat.Message{ID: "msg_2", Role: chat.RoleAssistant, Parts: []chat.Part{
		{Type: chat.PartText, Text: "I changed lib/x.py; the backup stays."},
		{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: "c1", Name: "bash", Arguments: `{"command":"cp lib/x.py.orig /tmp/keep.txt"}`}}}}
	result := chat.Message{ID: "msg_3", Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: "c1", Content: "ok"}}}}
	in := compaction.SummaryInput{Round: 1, ID: "sum_1_1", OriginalTask: "Fix it.", MaxTokens: 800, Count: count, Messages: []chat.Message{call, result}}
	out, err := summarize.Extractive{}.Summarize(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	_, files, _ := strings.Cut(out, "## Files\n")
	files, _, _ = strings.Cut(files, "\n## ")
	if !strings.Contains(files+"\n", "- lib/x.py\n") {
		t.Errorf("Files dropped lib/x.py, which the trail names only inside lib/x.py.orig:\n%s", out)
	}
	if strings.Contains(files, "lib/x.py.orig") {
		t.Errorf("Files repeats a path the trail names:\n%s", out)
	}
	for _, c := range []struct {
		text, path string
		want       bool
	}{
		{"- ran: cp lib/x.py.orig /tmp — msg_2", "lib/x.py", false},
		{"- edited: pkg/a.go — msg_2", "a.go", false},
		{"- edited: pkg/a.go — msg_2", "pkg/a.go", true},
		{"- ran: cat pkg/a.go. — msg_2", "pkg/a.go", true},
		{"- ran: cat pkg/a.go…", "pkg/a.go", false},
	} {
		if got := summarize.HoldsPath(c.text, c.path); got != c.want {
			t.Errorf("HoldsPath(%q, %q) = %v, want %v", c.text, c.path, got, c.want)
		}
	}
}

// TestProseWithinAQuarter: the extractive summary's sections (all but
// Files and the trail) take at most a quarter of summary_max_tokens, and
// Files about half (its paths counted one by one), so the summary without
// its trail stays within the cap: what the agent acted on is in the trail,
// exactly.
func TestProseWithinAQuarter(t *testing.T) {
	count := func(s string) int { return len(s) / 4 }
	var msgs []chat.Message
	for i := range 120 {
		msgs = append(msgs, chat.Message{ID: fmt.Sprintf("msg_%d", i+2), Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText,
			Text: fmt.Sprintf("Let me check pkg/mod%03d/file.go next: the issue is in step %d, so I will fix it and then run the tests.", i, i)}}})
	}
	const maxTokens = 800
	out, err := summarize.Extractive{}.Summarize(t.Context(), compaction.SummaryInput{Round: 1, ID: "sum_1_1", OriginalTask: "Fix it.",
		MaxTokens: maxTokens, Count: count, Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	out, _, _ = strings.Cut(out, "\n## "+summarize.SecTrail+"\n")
	prose, files, ok := strings.Cut(out, "\n## "+summarize.SecFiles+"\n")
	if !ok {
		t.Fatalf("no Files section:\n%s", out)
	}
	_, prose, _ = strings.Cut(prose, "\n## ") // the header names the round and the id
	if n := count(prose); n > maxTokens/4 || n < maxTokens/8 {
		t.Errorf("sections of %d tokens, want them filled to at most a quarter of %d:\n%s", n, maxTokens, prose)
	}
	if n := count(files); n < maxTokens/4 || count(out) > maxTokens {
		t.Errorf("Files of %d tokens, the summary without its trail %d: want Files filled, the whole within %d:\n%s", n, count(out), maxTokens, out)
	}
}

// TestHeldPathsIsHoldsPath: heldPaths, which reads a text once for many
// paths, answers as holdsPath does, on texts and paths built from the
// bytes that decide it (path bytes, dots, slashes, spaces, an ellipsis,
// a letter beyond ASCII, a backslash).
func TestHeldPathsIsHoldsPath(t *testing.T) {
	pieces := []string{"a", "b.go", ".", "/", "-", " ", "…", "é", `\`, ", ", "x.py", "~"}
	r := rand.New(rand.NewSource(1))
	build := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteString(pieces[r.Intn(len(pieces))])
		}
		return b.String()
	}
	for range 3000 {
		text := build(r.Intn(12))
		held := summarize.HeldPaths(text)
		for range 10 {
			path := build(1 + r.Intn(4))
			if r.Intn(2) == 0 && len(text) > 0 { // a piece of the text itself
				i := r.Intn(len(text))
				path = text[i:min(len(text), i+1+r.Intn(8))]
			}
			if got, want := held(path), summarize.HoldsPath(text, path); got != want {
				t.Fatalf("heldPaths(%q)(%q) = %v, holdsPath %v", text, path, got, want)
			}
		}
	}
}

// TestFilesKeepsAUnicodePathWhole: a path with letters beyond ASCII is
// listed whole, never from the middle of a word ("es/x.py" out of
// "src/données/x.py"), and a path inside a longer one after such a letter
// is not held by it.
func TestFilesKeepsAUnicodePathWhole(t *testing.T) {
	count := func(s string) int { return len(s) / 4 }
	in := compaction.SummaryInput{Round: 1, ID: "sum_1_1", OriginalTask: "Fix it.", MaxTokens: 800, Count: count, Messages: []chat.Message{
		{ID: "msg_2", Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText, Text: "I changed src/données/x.py and modèle.py."}}}}}
	out, err := summarize.Extractive{}.Summarize(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	_, files, _ := strings.Cut(out, "## Files\n")
	files, _, _ = strings.Cut(files, "\n## ")
	if strings.TrimSpace(files) != "- src/données/x.py\n- modèle.py" {
		t.Errorf("Files %q, want the two paths whole", files)
	}
	if summarize.HoldsPath("- edited: modèle.py — msg_2", "le.py") || summarize.HeldPaths("- edited: modèle.py — msg_2")("le.py") {
		t.Error("le.py is held by modèle.py")
	}
}

// TestPinFactsPinsWhatAPersonWrote: the latest request an LLM summary pins
// is the latest message a person wrote, not a framework's observation sent
// as user text (mini-swe-agent's <returncode> output), which it re-sent in
// every request until the next compaction: 60 of 243 LLM summaries at 8k on
// the corpus pinned a command's output as "Latest user request".
func TestPinFactsPinsWhatAPersonWrote(t *testing.T) {
	user := func(id, text string) chat.Message {
		return chat.Message{ID: id, Role: chat.RoleUser, Parts: []chat.Part{{Type: chat.PartText, Text: text}}}
	}
	in := compaction.SummaryInput{OriginalTask: "Fix the parser bug.", MaxTokens: 800, Messages: []chat.Message{
		user("msg_4", "Also keep the old API working."),
		{ID: "msg_5", Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText, Text: "```bash\ngrep -n parse src/parser.py\n```"}}},
		user("msg_6", "<returncode>0</returncode>\n<output>\n12:def parse(s):\n</output>"),
	}}
	got := summarize.PinFacts("Working on the parser.", in)
	if !strings.Contains(got, "## Latest user request (verbatim)\nAlso keep the old API working.") || strings.Contains(got, "def parse(s)") {
		t.Errorf("want the person's request pinned, not the observation:\n%s", got)
	}
}

// TestExtractiveLeavesOutEmptySections: a section with nothing in it is not
// written (its heading and "(none)" were re-sent in every request until
// the next compaction: Requested focus in every summary without
// instructions); one with something in it is.
func TestExtractiveLeavesOutEmptySections(t *testing.T) {
	msgs := []chat.Message{
		{ID: "msg_2", Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: "c1", Name: "bash", Arguments: `{"command":"ls src"}`}}}},
		{ID: "msg_3", Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: "c1", Content: "a.py"}}}},
		{ID: "msg_4", Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText, Text: "Listed."}}},
	}
	in := compaction.SummaryInput{Round: 1, ID: "sum_1_1", MaxTokens: 800, Messages: msgs}
	got, err := summarize.Extractive{}.Summarize(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"(none)", "## " + summarize.SecFocus, "## " + summarize.SecDecisions, "## " + summarize.SecPending} {
		if strings.Contains(got, gone) {
			t.Errorf("the summary holds %q:\n%s", gone, got)
		}
	}
	if !strings.Contains(got, "## "+summarize.SecState+"\nListed.") {
		t.Errorf("the summary lacks its state:\n%s", got)
	}
	in.Instructions = "keep the listing"
	if got, _ := (summarize.Extractive{}).Summarize(t.Context(), in); !strings.Contains(got, "## "+summarize.SecFocus+"\n- instructions: keep the listing") {
		t.Errorf("the summary lacks its focus:\n%s", got)
	}
}

// TestHandoffFoldsNameTheirSession: a hand-off carries its session's
// lists to a new session, whose expand tool reads its own messages only
// and whose own rounds write ids of the same shape: a fold line there
// names the session its ids are in, and what the document leaves out of a
// list (ISSUES keeps the last 20) is counted in it, not dropped silently.
// Before, `- folded: 12 earlier entries, in sum_4_1` named, in the new
// session, nothing or its own round 4's summary, and the 21st oldest
// issue was gone uncounted.
func TestHandoffFoldsNameTheirSession(t *testing.T) {
	var errs strings.Builder
	for i := range 25 {
		fmt.Fprintf(&errs, "- ValueError: bad value %d\n", i)
	}
	prev := "[contextd summary, round 4.]\n\n## Original task\n(kept)\n\n## Decisions\n- folded: 12 earlier entries, in sum_4_1, sum_2_1\n- use the new parser\n\n" +
		"## Errors and resolutions\n" + errs.String() + "\n## Files\n- src/a.py\n- folded: 3 earlier entries, in sum_4_1\n"
	view := []chat.Message{
		{ID: "msg_1", Role: chat.RoleUser, Kind: chat.KindNormal, Parts: []chat.Part{{Type: chat.PartText, Text: "Fix the parser bug."}}},
		{ID: "sum_4_1", Role: chat.RoleUser, Kind: chat.KindSummary, Parts: []chat.Part{{Type: chat.PartText, Text: prev}}},
	}
	doc := summarize.Handoff(view, "s_old")
	for _, want := range []string{
		"## DECISIONS\n- folded: 12 earlier entries, in sum_4_1, sum_2_1 of session s_old\n- use the new parser\n",
		"## ISSUES\n- folded: 5 earlier entries, in session s_old\n- ValueError: bad value 5\n",
		"- src/a.py\n- folded: 3 earlier entries, in sum_4_1 of session s_old\n",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("hand-off lacks %q:\n%s", want, doc)
		}
	}
	if strings.Contains(doc, "bad value 4\n") {
		t.Errorf("the hand-off keeps more than 20 issues:\n%s", doc)
	}
}

// TestHandoffCountsWhatItLeavesOutApart: where a hand-off's list both
// carries a fold of its session's summaries and leaves out entries of its
// own (ISSUES keeps the last 20), the two are counted apart: the ids lead
// to what the summaries folded, and what the document left out is in the
// session's view (the latest summary's text), which no id of the fold
// names. Before, one line counted both under the summaries' ids: the 5
// issues the document left out were not behind sum_2_1.
func TestHandoffCountsWhatItLeavesOutApart(t *testing.T) {
	var errs strings.Builder
	errs.WriteString("- folded: 7 earlier entries, in sum_2_1\n")
	for i := range 25 {
		fmt.Fprintf(&errs, "- ValueError: bad value %d\n", i)
	}
	prev := "[contextd summary, round 4.]\n\n## Original task\n(kept)\n\n## Errors and resolutions\n" + errs.String()
	view := []chat.Message{
		{ID: "msg_1", Role: chat.RoleUser, Kind: chat.KindNormal, Parts: []chat.Part{{Type: chat.PartText, Text: "Fix the parser bug."}}},
		{ID: "sum_4_1", Role: chat.RoleUser, Kind: chat.KindSummary, Parts: []chat.Part{{Type: chat.PartText, Text: prev}}},
	}
	doc := summarize.Handoff(view, "s_old")
	want := "## ISSUES\n- folded: 7 earlier entries, in sum_2_1 of session s_old\n- folded: 5 earlier entries, in session s_old\n- ValueError: bad value 5\n"
	if !strings.Contains(doc, want) {
		t.Errorf("hand-off lacks %q:\n%s", want, doc)
	}
}
