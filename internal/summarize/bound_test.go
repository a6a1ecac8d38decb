package summarize_test

import (
	"runtime"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/summarize"
)

// TestExtractiveInputIsBounded: the extractive summarizer reads at most
// MaxExtractiveChars of a view, as an LLM's prompt is bounded, so a view of
// 32 MB costs what one of 4 MB does (issue 24: a 210 MB view made every
// PrepareContext take a minute). What it extracts from the head of a long
// tool result (the error line) and from the newest messages stays.
func TestExtractiveInputIsBounded(t *testing.T) {
	view := func(mb int) []chat.Message {
		var msgs []chat.Message
		for i := range mb * 5 {
			id := "c" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + strings.Repeat("0", i/26)
			msgs = append(msgs,
				chat.Message{Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText, Text: "Let me run the tests."},
					{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: id, Name: "bash", Arguments: `{"command":"go test ./..."}`}}}},
				chat.Message{Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: id,
					Content: "FAILED: parser_test.go:12 error\n" + strings.Repeat("log line of the test run\n", 4_000)}}}})
		}
		msgs = append(msgs, chat.Message{Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText, Text: "Next I need to fix parser.go."}}})
		return msgs
	}
	run := func(msgs []chat.Message) (string, uint64) {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		out, err := summarize.Extractive{}.Summarize(t.Context(), compaction.SummaryInput{Round: 1, OriginalTask: "Fix the parser.",
			Messages: msgs, MaxTokens: 4000, Count: func(s string) int { return len(s) / 4 }})
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		return out, after.TotalAlloc - before.TotalAlloc
	}
	small, large := view(4), view(32)
	_, smallCost := run(small)
	out, largeCost := run(large)
	if ratio := float64(largeCost) / float64(smallCost); ratio > 2 {
		t.Errorf("summarizing a 32 MB view allocates %.1f× what a 4 MB one does; want at most 2× (the input is bounded)", ratio)
	}
	for _, want := range []string{"FAILED: parser_test.go:12 error", "Next I need to fix parser.go."} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}
