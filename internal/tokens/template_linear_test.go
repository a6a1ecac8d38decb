package tokens

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/contextd/contextd/internal/chat"
)

// linearRequest is rounds of an agent loop: a question, reasoning and two
// tool calls, two results, an answer.
func linearRequest(rounds int) ([]chat.Tool, []chat.Message) {
	tools := []chat.Tool{{Name: "read_file", Description: "Read a file.",
		Parameters: `{"type": "object", "properties": {"path": {"type": "string"}, "opts": {"type": "object", "properties": {"max": {"type": "integer"}}}}, "required": ["path"]}`}}
	var msgs []chat.Message
	text := func(role chat.Role, s string) chat.Message {
		return chat.Message{Role: role, Parts: []chat.Part{{Type: chat.PartText, Text: s}}}
	}
	for r := range rounds {
		call := func(id string) chat.Part {
			return chat.Part{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: id, Name: "read_file", Arguments: fmt.Sprintf(`{"path": "f%d.go", "opts": {"max": %d}}`, r, r)}}
		}
		result := func(id string) chat.Message {
			return chat.Message{Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: id, Content: fmt.Sprintf("package f%d\n\nfunc F() {}\n", r)}}}}
		}
		msgs = append(msgs,
			text(chat.RoleUser, fmt.Sprintf("Round %d: what is in the files?", r)),
			chat.Message{Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText, Text: "<think>\nRead them.\n</think>\n\nReading."}, call("a"), call("b")}},
			result("a"), result("b"),
			text(chat.RoleAssistant, "Both define F."),
		)
	}
	return tools, msgs
}

// TestTemplatesAreLinear asserts that counting a request with a chat
// template allocates in proportion to the request: ten times the messages
// allocate at most 11 times the bytes (string building that copied the
// conversation for each message would allocate 100 times).
func TestTemplatesAreLinear(t *testing.T) {
	for name, tmpl := range chatTemplates {
		t.Run(name, func(t *testing.T) {
			var encName string
			for _, m := range openWeightModels() {
				if m.Template == name {
					encName = m.Encoding
				}
			}
			if encName == "" {
				t.Fatalf("no model uses template %s", name)
			}
			enc, err := loadTestEncoding(t, encName)
			if err != nil {
				t.Fatal(err)
			}
			fr := Framing{ReplyPriming: tmpl.replyPriming(), template: tmpl}
			allocated := func(rounds int) uint64 {
				tools, msgs := linearRequest(rounds)
				CountRequest(enc, fr, "Be brief.", tools, msgs) // warm
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				CountRequest(enc, fr, "Be brief.", tools, msgs)
				runtime.ReadMemStats(&after)
				return after.TotalAlloc - before.TotalAlloc
			}
			small, big := allocated(200), allocated(2000)
			ratio := float64(big) / float64(small)
			t.Logf("%s: 1,000 messages %d B, 10,000 messages %d B, ratio %.2f", name, small, big, ratio)
			if ratio > 11 {
				t.Errorf("%s: ten times the messages allocate %.1f times the bytes, want ≤ 11", name, ratio)
			}
		})
	}
}
