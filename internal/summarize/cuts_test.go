package summarize_test

import (
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/summarize"
)

// TestExtractiveNeverCutsAWord: a dot inside a file name does not end a
// sentence (the summary said "py subtracted instead of adding."), an
// absolute path keeps its leading slash, and a shortened line ends after a
// whole word with an ellipsis.
func TestExtractiveNeverCutsAWord(t *testing.T) {
	long := "I'll rewrite " + strings.Repeat("the accumulator ", 20) + "in calc.py today"
	in := compaction.SummaryInput{Round: 1, OriginalTask: "Fix calc.", MaxTokens: 2000, ID: "sum_1_1",
		Count: func(s string) int { return len(s) / 4 },
		Messages: []chat.Message{
			{Role: chat.RoleAssistant, Parts: []chat.Part{
				{Type: chat.PartText, Text: "The issue is that calc.py subtracted instead of adding."},
				{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: "c1", Name: "bash", Arguments: `{"command":"cat /testbed/src/calc.py"}`}}}},
			{Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: "c1", Content: "def add(a, b): return a - b"}}}},
			{Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText, Text: long}}},
		}}
	out, err := summarize.Extractive{}.Summarize(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"The issue is that calc.py subtracted instead of adding.", " /testbed/src/calc.py"} { // in the trail
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\n- py subtracted") || strings.Contains(out, " testbed/src/calc.py") {
		t.Errorf("summary cut a word or a path:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		i := strings.Index(line, "…")
		if i <= 0 {
			continue
		}
		if kept := strings.TrimPrefix(line[:i], "- "); strings.Contains(long, kept) && !strings.Contains(long, kept+" ") {
			t.Errorf("line shortened inside a word: %q", line)
		}
	}
}

// TestURLIsNoPath: a URL the assistant wrote, or one a previous summary
// (its trail, an LLM's prose) names, is no file path: the Files section
// listed "/docs.pytest.org/en/stable/how-to/capture-warnings.html", a path
// that lost the URL's scheme and its host's slash (the recall bench's
// property found it in LLM summaries).
func TestURLIsNoPath(t *testing.T) {
	url := "https://docs.pytest.org/en/stable/how-to/capture-warnings.html"
	prev := "[contextd summary, round 1.]\n## Original task\nsee " + url + "\n## Trail\n- url: " + url + " — msg_3\n"
	in := compaction.SummaryInput{Round: 2, OriginalTask: "Fix it.", MaxTokens: 2000, ID: "sum_2_1", Previous: prev,
		Count: func(s string) int { return len(s) / 4 },
		Messages: []chat.Message{
			{Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText, Text: "Per " + url + " I'll edit /testbed/src/conf.py next."}}},
		}}
	extractive, err := summarize.Extractive{}.Summarize(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	llm := summarize.PinFacts("## Current state\nworking", in)
	for name, out := range map[string]string{"extractive": extractive, "llm": llm} {
		if strings.Contains(out, "- /docs.pytest.org") || strings.Contains(out, "- docs.pytest.org") {
			t.Errorf("%s: a URL became a path:\n%s", name, out)
		}
		if !strings.Contains(out, "/testbed/src/conf.py") {
			t.Errorf("%s: lacks the path the assistant wrote:\n%s", name, out)
		}
	}
}
