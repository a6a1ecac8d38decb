package summarize_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/summarize"
)

// TestTrailMergesAndFolds: a chained summary merges the previous trail (a
// file's newer change replaces its line, a later read does not hide it) and
// folds its oldest lines into one that names their message ids, newest
// first, within the budget.
func TestTrailMergesAndFolds(t *testing.T) {
	count := func(s string) int { return len(s) / 4 }
	call := func(id, name, args string) chat.Message {
		return chat.Message{ID: id, Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: "c" + id, Name: name, Arguments: args}}}}
	}
	result := func(id, call, out string) chat.Message {
		return chat.Message{ID: id, Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: "c" + call, Content: out}}}}
	}
	round1 := compaction.SummaryInput{Round: 1, ID: "sum_1_1", MaxTokens: 800, Count: count, Messages: []chat.Message{
		call("msg_2", "Edit", `{"file_path":"/repo/a.go","old_string":"x","new_string":"y"}`), result("msg_3", "msg_2", "ok"),
		call("msg_4", "Bash", `{"command":"go test ./..."}`), result("msg_5", "msg_4", "--- FAIL: TestA (0.01s)\nexit status 1"),
	}}
	s1, err := summarize.Extractive{}.Summarize(t.Context(), round1)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"- edited: /repo/a.go — msg_2\n", "- ran: go test ./... — exit 1, msg_4\n", "- test failed: TestA — msg_5\n"} {
		if !strings.Contains(s1, want) {
			t.Errorf("round 1 lacks %q:\n%s", want, s1)
		}
	}
	round2 := compaction.SummaryInput{Round: 2, ID: "sum_2_1", MaxTokens: 800, Count: count, Previous: s1, Messages: []chat.Message{
		call("msg_7", "Read", `{"file_path":"/repo/a.go"}`), result("msg_8", "msg_7", "package a"),
		call("msg_9", "Bash", `{"command":"go test ./..."}`), result("msg_10", "msg_9", "--- PASS: TestA (0.01s)\nok"),
	}}
	s2, _ := summarize.Extractive{}.Summarize(t.Context(), round2)
	_, trail, _ := strings.Cut(s2, "## "+summarize.SecTrail)
	for _, want := range []string{"- edited: /repo/a.go — msg_2\n", "- ran: go test ./... — msg_9\n", "- test passed: TestA — msg_10\n"} {
		if !strings.Contains(trail, want) {
			t.Errorf("round 2 lacks %q:\n%s", want, trail)
		}
	}
	if strings.Count(trail, "TestA") != 1 || strings.Count(trail, "go test") != 1 || strings.Contains(trail, "read: /repo/a.go") {
		t.Errorf("round 2 repeats a line:\n%s", trail)
	}

	// Many commands over a small budget: the newest stay, the oldest fold
	// into a line naming their ids, newest first.
	var many []chat.Message
	for i := range 60 {
		many = append(many, call(fmt.Sprintf("msg_%d", 100+2*i), "Bash", fmt.Sprintf(`{"command":"make step%02d"}`, i)))
		many = append(many, result(fmt.Sprintf("msg_%d", 101+2*i), fmt.Sprintf("msg_%d", 100+2*i), "exit code: 0"))
	}
	s3, _ := summarize.Extractive{}.Summarize(t.Context(), compaction.SummaryInput{Round: 3, ID: "sum_3_1", MaxTokens: 400, Count: count, Previous: s2, Messages: many})
	_, trail, _ = strings.Cut(s3, "## "+summarize.SecTrail)
	if count(trail) > 400 || !strings.Contains(trail, "make step59") || strings.Contains(trail, "make step00") {
		t.Errorf("over budget (%d tokens) or not the newest kept:\n%s", count(trail), trail)
	}
	if !strings.Contains(trail, "- folded: ") || !strings.Contains(trail, "older lines, from messages msg_") || !strings.Contains(trail, "message id sum_3_1") {
		t.Errorf("no fold line naming ids and the summary:\n%s", trail)
	}
	_, ids, _ := strings.Cut(trail, "from messages ")
	var first int
	if _, err := fmt.Sscanf(ids, "msg_%d", &first); err != nil || first < 100 {
		t.Errorf("the fold line should name the newest ids first, starts with %q", ids[:min(len(ids), 20)])
	}
}
