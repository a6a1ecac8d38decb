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

// templateUnderTest loads the encoding of a model that uses template name
// and the framing that counts with it.
func templateUnderTest(t testing.TB, name string) (*Encoding, Framing) {
	t.Helper()
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
	tmpl := chatTemplates[name]
	return enc, Framing{ReplyPriming: tmpl.replyPriming(), template: tmpl}
}

// TestTemplatesAreLinear asserts that counting a request with a chat
// template allocates in proportion to the request: ten times the messages
// allocate at most 11 times the bytes (string building that copied the
// conversation for each message would allocate 100 times).
func TestTemplatesAreLinear(t *testing.T) {
	for name := range chatTemplates {
		t.Run(name, func(t *testing.T) {
			enc, fr := templateUnderTest(t, name)
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

// TestTemplatesOddMessages: every template counts messages a client may
// send that the golden set does not hold — images, a tool message with text
// instead of a result, a result for an unknown call, a call with arguments
// that are not JSON, a system message mid-conversation, tools whose schema
// is not an object — without panicking, and with every message's framing
// (its tokens less those of the parts the template rendered) at least 0.
func TestTemplatesOddMessages(t *testing.T) {
	img := chat.Part{Type: chat.PartImage, Image: &chat.Image{Width: 512, Height: 512}}
	msgs := []chat.Message{
		{Role: chat.RoleUser, Parts: []chat.Part{{Type: chat.PartText, Text: "look"}, img, {Type: chat.PartText, Text: "and <|end|> <think> <｜User｜>"}}},
		{Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: "x", Name: "f", Arguments: "not json"}}}},
		{Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText, Text: "A long explanation of why f is the right call here, which some templates leave out."},
			{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: "y", Name: "f", Arguments: `{"a": ["x", 1]}`}}}},
		{Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartText, Text: "plain text result"}}},
		{Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: "unknown", Content: ""}}}},
		{Role: chat.RoleSystem, Parts: []chat.Part{{Type: chat.PartText, Text: "  "}}},
		{Role: chat.RoleAssistant},
		{Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText, Text: "<think>\nA long chain of reasoning that an earlier turn's template drops.\n</think>\n\nOK."}}},
		{Role: chat.RoleUser, Parts: []chat.Part{{Type: chat.PartText, Text: "\x1c\u00a0trim me\u2003"}}},
	}
	tools := []chat.Tool{
		{Name: "f", Parameters: `{"type": "object", "properties": {"a": {"type": "array", "items": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}, "b": {"enum": []}, "c": {"type": ["string"]}}}`},
		{Name: "g", Description: "\n\r\n", Parameters: `[1, 2]`},
		{Name: "h", Parameters: `{"type": "string"}`},
	}
	for name := range chatTemplates {
		t.Run(name, func(t *testing.T) {
			enc, fr := templateUnderTest(t, name)
			for _, system := range []string{"", "Be brief."} {
				rc := CountRequest(enc, fr, system, tools, msgs)
				if rc.Total() <= 0 || len(rc.PerMsg) != len(msgs) || len(rc.PerTool) != len(tools) {
					t.Fatalf("system %q: %+v", system, rc)
				}
				for i := range msgs {
					for _, mc := range []MessageCount{CountMessage(enc, fr, &msgs[i]), rc.PerMsg[i]} {
						if mc.Tokens < 0 || mc.Framing < 0 || len(mc.Parts) != len(msgs[i].Parts) {
							t.Errorf("message %d: %+v", i, mc)
						}
					}
				}
			}
		})
	}
}

// BenchmarkChatTemplates counts a 1,000-message agent loop with each
// template; read MB/s (of the messages' text).
func BenchmarkChatTemplates(b *testing.B) {
	for name := range chatTemplates {
		enc, fr := templateUnderTest(b, name)
		tools, msgs := linearRequest(200)
		size := 0
		for _, m := range msgs {
			for _, p := range m.Parts {
				size += len(p.Text)
				if p.ToolCall != nil {
					size += len(p.ToolCall.Arguments)
				}
				if p.ToolResult != nil {
					size += len(p.ToolResult.Content)
				}
			}
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				CountRequest(enc, fr, "Be brief.", tools, msgs)
			}
		})
	}
}

// Qwen3's template writes string-valued arguments (after the server's
// json.loads) raw, and anything else as JSON.
func TestQwenStringArguments(t *testing.T) {
	for args, want := range map[string]string{
		`"Paris"`:          "Paris",
		`"a \"q\" \u00e9"`: `a "q" é`,
		`{"city":"Paris"}`: templateJSON(`{"city":"Paris"}`),
		`not json`:         "not json",
	} {
		if got := qwenArguments(args); got != want {
			t.Errorf("qwenArguments(%s) = %q, want %q", args, got, want)
		}
	}
}
