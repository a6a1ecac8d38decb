package gateway

import (
	"testing"

	"github.com/contextd/contextd/internal/chat"
)

// TestDetailOf: results of one call id with different contents disagree;
// a result the client cleared, or a message other than a result, agrees
// with any.
func TestDetailOf(t *testing.T) {
	result := func(content string) chat.Message {
		return chat.Message{Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: "call_0", Content: content}}}}
	}
	a, b := result("package a"), result("package b")
	if detailsAgree(detailOf(&a), detailOf(&b)) {
		t.Error("different results agree")
	}
	if again := result("package a\n"); !detailsAgree(detailOf(&a), detailOf(&again)) {
		t.Error("the same result with a trailing newline disagrees")
	}
	for _, cleared := range []string{"[Old tool result content cleared]", "", "  "} {
		c := result(cleared)
		if !detailsAgree(detailOf(&a), detailOf(&c)) {
			t.Errorf("a result cleared to %q disagrees", cleared)
		}
	}
	user := chat.Message{Role: chat.RoleUser, Parts: []chat.Part{{Type: chat.PartText, Text: "hi"}}}
	if detailOf(&user) != ([16]byte{}) {
		t.Error("a user message has a detail")
	}
}
