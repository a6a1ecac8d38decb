package tokens_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/tokens"
)

// diffChatNumbers are the numbers of tool-call arguments and schemas: those
// JavaScript prints as Python does. The reference renders the templates in
// JavaScript (1.0 → 1, 1e-05 → 0.00001, 2^64 rounded), the servers and
// contextd as Python's json.dumps (TestTemplateJSONIsPythons checks those
// against python3).
var diffChatNumbers = []string{"0", "1", "-1", "-42", "1.5", "0.1", "-0.25", "3.14159265358979", "123456789",
	"9007199254740991", "0.001", "2.5", "1000000"}

// neutralRequest reads a generated request, with its tool-call arguments
// in the form the reference renders for gpt-oss (dumpsJSON).
func neutralRequest(t *testing.T, raw []byte) goldenChat {
	var g goldenChat
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatalf("generated request %s: %v", raw, err)
	}
	for _, m := range g.Messages {
		for j := range m.ToolCalls {
			m.ToolCalls[j].Arguments = dumpsJSON(m.ToolCalls[j].Arguments)
		}
	}
	return g
}

// diffChat compares each template's count of each request with the
// reference; where the template raises, it must be exactly where the golden
// chat test expects it to.
func diffChat(t *testing.T, encs *tokens.Encodings, reqs []goldenChat, inputs []any, rows []map[string]*int) {
	reg, err := tokens.NewRegistry(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ template, model string }{
		{tokens.TemplateQwen3, "qwen3-32b"},
		{tokens.TemplateQwen25, "qwen2.5-7b"},
		{tokens.TemplateLlama3, "llama-3-8b"},
		{tokens.TemplateLlama31, "llama-3.1-8b"},
		{tokens.TemplateDeepSeekV3, "deepseek-v3"},
		{tokens.TemplateHarmony, "gpt-oss-20b"},
		{tokens.TemplateGemma3, "gemma-3-27b"},
	} {
		m, ok := reg.Lookup(tc.model)
		if !ok || m.Template != tc.template {
			t.Fatalf("%s is not registered with the %s template: %+v", tc.model, tc.template, m)
		}
		enc, err := encs.Get(m.Encoding)
		if err != nil {
			t.Fatal(err)
		}
		fr := tokens.FramingOf(m)
		mm := mismatches{t: t, name: tc.template}
		for i, g := range reqs {
			tools, msgs := g.toChat()
			input := func() string { return fmt.Sprintf("request %d %s", i, shorten(string(inputs[i].(json.RawMessage)))) }
			want, has := rows[i][tc.template]
			if !has {
				t.Fatalf("count.mjs has no %s count for request %d", tc.template, i)
			}
			// The templates see the system prompt as a leading system message.
			all := msgs
			if g.System != "" {
				all = append([]chat.Message{{Role: chat.RoleSystem, Parts: []chat.Part{{Type: chat.PartText, Text: g.System}}}}, msgs...)
			}
			raises := tc.template == tokens.TemplateGemma3 && gemmaRaises(all)
			if tc.template == tokens.TemplateLlama31 {
				rest := all
				if len(rest) > 0 && rest[0].Role == chat.RoleSystem {
					rest = rest[1:]
				}
				if len(tools) > 0 {
					if len(rest) == 0 {
						raises = true // no first user message to declare the tools in
					} else {
						rest = rest[1:] // that message, whose tool calls are not rendered
					}
				}
				raises = raises || manyCalls(rest)
			}
			if want == nil || raises {
				mm.of++
				if (want == nil) != raises {
					mm.n++
					if mm.n <= diffShown {
						t.Errorf("%s: the template raises: reference %v, expected %v: %s", tc.template, want == nil, raises, input())
					}
				}
				continue
			}
			mm.check(int(tokens.CountRequest(enc, fr, g.System, tools, msgs).Total()), *want, input)
		}
		mm.done()
	}
}

// hasCalls reports whether m makes a tool call.
func hasCalls(m chat.Message) bool {
	for _, p := range m.Parts {
		if p.Type == chat.PartToolCall {
			return true
		}
	}
	return false
}

// content returns a message's content: often empty or short, sometimes
// several atoms, sometimes JSON.
func (g *textGen) content() string {
	switch g.rng.IntN(10) {
	case 0:
		return ""
	case 1:
		return g.json(3)
	case 2, 3:
		return g.pick(diffWords)
	default:
		var b strings.Builder
		for range 1 + g.rng.IntN(20) {
			b.WriteString(g.atom())
		}
		return b.String()
	}
}

// schema returns a random JSON schema for a tool's parameters.
func (g *textGen) schema(depth int) map[string]any {
	types := []string{"string", "integer", "number", "boolean", "array", "object"}
	typ := g.pick(types)
	if depth == 0 && typ != "object" && g.rng.IntN(2) == 0 {
		typ = "object"
	}
	s := map[string]any{"type": typ}
	if g.rng.IntN(3) == 0 {
		s["description"] = g.content()
	}
	switch typ {
	case "string":
		if g.rng.IntN(4) == 0 {
			s["enum"] = []string{g.pick(diffWords), g.short()}
		}
	case "integer", "number":
		if g.rng.IntN(3) == 0 {
			s["minimum"] = g.value(0)
		}
	case "array":
		if depth < 3 {
			s["items"] = g.schema(depth + 1)
		}
	case "object":
		if depth < 3 {
			props := map[string]any{}
			var req []string
			for range g.rng.IntN(4) {
				k := g.key()
				props[k] = g.schema(depth + 1)
				if g.rng.IntN(2) == 0 {
					req = append(req, k)
				}
			}
			s["properties"] = props
			if req != nil {
				s["required"] = req
			}
		}
	}
	if g.rng.IntN(8) == 0 {
		s = map[string]any{"anyOf": []any{s, map[string]any{"type": "null"}}}
	}
	return s
}

// request returns the i-th chat request in chat_requests.jsonl's form.
func (g *textGen) request(i int) []byte {
	type call struct {
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	type message struct {
		Role       string `json:"role"`
		Content    string `json:"content"`
		ToolCalls  []call `json:"tool_calls,omitempty"`
		ToolCallID string `json:"tool_call_id,omitempty"`
	}
	type tool struct {
		Name        string         `json:"name"`
		Description string         `json:"description,omitempty"`
		Parameters  map[string]any `json:"parameters,omitempty"`
	}
	req := struct {
		Name     string    `json:"name"`
		System   string    `json:"system,omitempty"`
		Tools    []tool    `json:"tools,omitempty"`
		Messages []message `json:"messages"`
	}{Name: fmt.Sprintf("diff-%d", i)}
	switch g.rng.IntN(4) {
	case 0: // none
	case 1:
		req.System = g.pick(diffWords)
	default:
		req.System = g.content()
	}
	var names []string
	for range []int{0, 0, 1, 1, 2, 3}[g.rng.IntN(6)] {
		name := g.pick([]string{"get_weather", "read_file", "search", "run", "f", "tool_ü", "a.b", "x-y"})
		names = append(names, name)
		t := tool{Name: name}
		if g.rng.IntN(3) > 0 {
			t.Description = g.content()
		}
		if g.rng.IntN(5) > 0 {
			t.Parameters = g.schema(0)
		}
		req.Tools = append(req.Tools, t)
	}
	// Roles in any order (consecutive same-role messages too), except that
	// tool results answer the calls of the assistant message before them,
	// all of them, in order, as the APIs require.
	calls := 0
	for range 1 + g.rng.IntN(8) {
		m := message{Role: []string{"user", "user", "assistant", "assistant", "system"}[g.rng.IntN(5)], Content: g.content()}
		var pending []string
		if m.Role == "assistant" && len(names) > 0 && g.rng.IntN(2) == 0 {
			for range 1 + g.rng.IntN(3)*g.rng.IntN(2) {
				calls++
				id := fmt.Sprintf("call_%d", calls)
				args := map[string]any{}
				for range g.rng.IntN(4) {
					args[g.key()] = g.value(2)
				}
				m.ToolCalls = append(m.ToolCalls, call{ID: id, Name: g.pick(names), Arguments: marshal(args)})
				pending = append(pending, id)
			}
			if g.rng.IntN(2) == 0 {
				m.Content = ""
			}
		}
		req.Messages = append(req.Messages, m)
		for _, id := range pending {
			req.Messages = append(req.Messages, message{Role: "tool", Content: g.content(), ToolCallID: id})
		}
	}
	if req.Messages[len(req.Messages)-1].Role == "assistant" && g.rng.IntN(3) > 0 {
		req.Messages = append(req.Messages, message{Role: "user", Content: g.content()})
	}
	return marshal(req)
}

// dumpsJSON rewrites compact JSON as Python's json.dumps(ensure_ascii=False)
// writes it (", " and ": ", U+2028 and U+2029 unescaped): the arguments text
// the reference's harmony renderer is given, as clients written in Python
// send it (other templates parse the arguments, so the form is theirs).
func dumpsJSON(raw json.RawMessage) json.RawMessage {
	var b strings.Builder
	inString := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case inString && c == '\\' && (strings.HasPrefix(string(raw[i:]), `\u2028`) || strings.HasPrefix(string(raw[i:]), `\u2029`)):
			b.WriteString(map[byte]string{'8': "\u2028", '9': "\u2029"}[raw[i+5]])
			i += 5
		case inString && c == '\\':
			b.WriteByte(c)
			b.WriteByte(raw[i+1])
			i++
		case c == '"':
			inString = !inString
			b.WriteByte(c)
		case !inString && (c == ',' || c == ':'):
			b.WriteByte(c)
			b.WriteByte(' ')
		default:
			b.WriteByte(c)
		}
	}
	return json.RawMessage(b.String())
}
