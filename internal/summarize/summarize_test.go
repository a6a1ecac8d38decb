package summarize_test

import (
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
	for _, want := range []string{"round 2", "## Original task\nFix the parser bug.", "## Completed work", "`bash`: cat src/parser.py",
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
	doc := summarize.Handoff(view)
	for _, want := range []string{"## ORIGINAL TASK\nFix the parser bug.", "## CURRENT", "## DONE", "## IN_PROGRESS", "## NEXT",
		"update the docs", "## FILES", "- src/parser.py", "## ISSUES", "AssertionError"} {
		if !strings.Contains(doc, want) {
			t.Errorf("hand-off lacks %q:\n%s", want, doc)
		}
	}
}
