package compaction_test

import (
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
)

// TestPrunedOutputKeepsItsArtifacts: a pruned tool output keeps, in its
// placeholder, its exit code, the first lines of its errors and the tests
// it names with their results, failing first (masking
// that keeps the artifact: the recall bench's error lines, and the trail of
// a later summary that reads the placeholder); a long observation sent as
// user text keeps the error lines of the middle it loses. A duplicate's
// placeholder keeps none (its newer copy holds them).
func TestPrunedOutputKeepsItsArtifacts(t *testing.T) {
	noise := strings.Repeat("collecting ... lots of output\n", 120)
	failing := "Traceback (most recent call last):\n" + noise + "see https://docs.python.org/3/library/functions.html#int.\nValueError: invalid literal for int() with base 10: 'x'\n" +
		noise + "E   AssertionError: assert 2 == 3\n<returncode>1</returncode>"
	b := (&builder{}).user("Fix the bug.")
	b.assistant("Run it.", "c0").result("c0", failing)
	b.assistant("Again.", "c1").result("c1", noise+"tests/test_a.py::test_one PASSED\n"+noise+"FAILED tests/test_a.py::test_two - assert 1\nall fine\n<returncode>0</returncode>")
	// A text-mode harness: the observation is the next user message.
	b.assistant("```bash\npython t.py\n```")
	b.user("<returncode>1</returncode>\n<output>\n" + noise + "KeyError: 'missing'\n" + noise + "done\n</output>")
	b.steps(8, 400, "s")
	b.assistant("```bash\nls\n```").user("<returncode>0</returncode>\n<output>\nok\n</output>") // the latest user message
	req := request(b, 20_000, compaction.TierPrune)
	req.Target = 0.01 // prune everything that may be
	plan := mustPlan(t, req)
	byOrig := map[string]chat.Message{}
	for _, it := range plan.Items {
		for _, m := range plan.View {
			if m.ID == it.NewID {
				byOrig[it.Replaced[0]] = m
			}
		}
	}
	text := func(id string) string {
		m, ok := byOrig[id]
		if !ok {
			t.Fatalf("%s was not pruned: %+v", id, plan.Items)
		}
		if tr := m.Parts[0].ToolResult; tr != nil {
			return tr.Content
		}
		return m.Text()
	}
	got := text("m3")
	for _, want := range []string{"exit code 1", "\nValueError: invalid literal for int() with base 10: 'x'", "\nAssertionError: assert 2 == 3", "\nhttps://docs.python.org/3/library/functions.html#int", "ExpandMessage with message id m3"} {
		if !strings.Contains(got, want) {
			t.Errorf("placeholder of a failed output lacks %q:\n%s", want, got)
		}
	}
	if got := text("m5"); !strings.Contains(got, "\nexit code 0") || !strings.Contains(got, "\nFAILED tests/test_a.py::test_two\ntests/test_a.py::test_one PASSED") {
		t.Errorf("placeholder of a passing output: %s", got)
	}
	if got := text("m7"); !strings.Contains(got, "\nKeyError: 'missing'") || !strings.Contains(got, "<returncode>1</returncode>") {
		t.Errorf("a long observation's middle lost its error line:\n%s", got)
	}
}

// TestDuplicatePlaceholderKeepsNoFacts: the older copy of identical output
// names its newer copy and repeats nothing of it.
func TestDuplicatePlaceholderKeepsNoFacts(t *testing.T) {
	same := strings.Repeat("line\n", 200) + "RuntimeError: boom\n"
	b := (&builder{}).user("Fix the bug.")
	b.assistant("a", "c0").result("c0", same)
	b.assistant("b", "c1").result("c1", same)
	b.steps(4, 100, "s")
	req := request(b, 20_000, compaction.TierPrune)
	req.Target = 0.01
	plan := mustPlan(t, req)
	ph := plan.View[2]
	if ph.Kind != chat.KindPlaceholder || !strings.Contains(ph.Parts[0].ToolResult.Content, "identical to the newer message m5") ||
		strings.Contains(ph.Parts[0].ToolResult.Content, "RuntimeError") {
		t.Errorf("duplicate placeholder: %+v", ph.Parts[0].ToolResult)
	}
}

// TestPlaceholderFactsAreBounded: what a placeholder keeps is bounded
// whatever the output (URLs as long as the scan window, an output made
// only of error lines and URLs), and a placeholder never takes more tokens
// than the output it stands for: masking must not grow the view.
func TestPlaceholderFactsAreBounded(t *testing.T) {
	long := func(i int) string {
		return "https://bucket.example.com/obj" + string(rune('a'+i)) + "?X-Signature=" + strings.Repeat("ab12", 4000)
	}
	huge := "Downloading\n" + long(0) + "\n" + long(1) + "\n" + long(2) + "\nerror: upload failed\n<returncode>1</returncode>"
	// Just above minPruneTokens, and nothing but facts.
	dense := "error: a1 b1\nerror: a2 b2\nerror: a3 b3\nhttps://x.io/1\nhttps://x.io/2\nhttps://x.io/3\nexit code 1\n"
	for count(&chat.Message{Parts: []chat.Part{{Type: chat.PartText, Text: dense}}}) < 110 {
		dense = strings.Replace(dense, "https://x.io/", "https://x.io/segment/", 3)
	}
	b := (&builder{}).user("Fix the bug.")
	b.assistant("Upload.", "c0").result("c0", huge)
	b.assistant("Again.", "c1").result("c1", dense)
	b.steps(8, 400, "s")
	req := request(b, 200_000, compaction.TierPrune)
	req.Target = 0.0001
	plan := mustPlan(t, req)
	for _, it := range plan.Items {
		if it.TokensAfter >= it.TokensBefore {
			t.Errorf("placeholder %s of %s grew the view: %d tokens for %d", it.NewID, it.Replaced[0], it.TokensAfter, it.TokensBefore)
		}
		for _, m := range plan.View {
			if m.ID == it.NewID && it.Replaced[0] == "m3" {
				got := m.Parts[0].ToolResult.Content
				if len(got) > 2_000 {
					t.Errorf("placeholder of an output with long URLs keeps %d bytes:\n%.300s", len(got), got)
				}
				if !strings.Contains(got, "error: upload failed") || !strings.Contains(got, "exit code 1") {
					t.Errorf("placeholder lost its error line or exit code:\n%.300s", got)
				}
			}
		}
	}
}
