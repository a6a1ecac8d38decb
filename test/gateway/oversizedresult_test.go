package gateway_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// TestToolOutputLargerThanTheWindow: an agent loop that does not cut its
// tool outputs (the npm openai loop's `cat` of a 1 MB file) sends a
// result larger than gpt-4o's 128k window alone. Its newest results are
// protected from pruning, and the request was refused for good (400,
// "request cannot fit the context window", the result named as the
// largest message): every later call carries it. Now the result keeps its
// head and tail around a placeholder that names the rest's id, the
// request goes upstream within the window, and the next round too.
func TestToolOutputLargerThanTheWindow(t *testing.T) {
	s := start(t, nil)
	var b strings.Builder
	for i := 0; b.Len() < 1<<20; i++ {
		fmt.Fprintf(&b, "line %d: config value alpha=%d beta=%d gamma=%d, checked and recorded\n", i, i*7, i*13, i*i)
	}
	out := b.String()
	call := map[string]any{"id": "call_cat", "type": "function", "function": map[string]any{"name": "shell", "arguments": `{"command":"cat big.txt"}`}}
	history := []any{
		map[string]any{"role": "user", "content": "Read big.txt and tell me its last line."},
		map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{call}},
		map[string]any{"role": "tool", "tool_call_id": "call_cat", "content": out},
	}
	tools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "shell", "parameters": map[string]any{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}}}}}
	session := "" // named by the call that made it (a later one finds it by its history)
	for round := range 2 {
		s.fake.Script(gatewaytest.Reply{Text: fmt.Sprintf("answer %d", round)})
		resp, body := s.post("/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": history, "tools": tools}, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("round %d: %d %s", round, resp.StatusCode, body)
		}
		if session == "" {
			session = resp.Header.Get("X-Contextd-Session")
		}
		reqs := s.fake.Requests()
		sent := string(reqs[len(reqs)-1].Raw)
		last := strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:])
		if !strings.Contains(sent, "line 0: config") || !strings.Contains(sent, last) {
			t.Errorf("round %d: the output's head or tail (%q) did not go upstream", round, last)
		}
		if !strings.Contains(sent, "contextd pruned") {
			t.Errorf("round %d: no placeholder says how to read the rest", round)
		}
		// The id the placeholder names expands to the output, byte for
		// byte (the original is kept). It tells the model, which cannot
		// call ExpandMessage, to call nothing (issue 29).
		const how = "Its id is "
		if i := strings.Index(sent, how); i < 0 || strings.Contains(sent, "ExpandMessage") {
			t.Errorf("round %d: the placeholder names no id, or tells to call ExpandMessage", round)
		} else {
			id, _, _ := strings.Cut(sent[i+len(how):], ";")
			var x struct {
				Message struct {
					Parts []struct {
						ToolResult *struct {
							Content string `json:"content"`
						} `json:"toolResult"`
					} `json:"parts"`
				} `json:"message"`
			}
			s.rpc("ExpandMessage", map[string]any{"sessionId": session, "messageId": id}, &x)
			if len(x.Message.Parts) != 1 || x.Message.Parts[0].ToolResult == nil || x.Message.Parts[0].ToolResult.Content != out {
				t.Errorf("round %d: ExpandMessage(%s) is not the output whole", round, id)
			}
		}
		if len(sent) > 600<<10 {
			t.Errorf("round %d: %d bytes went upstream", round, len(sent))
		}
		history = append(history, map[string]any{"role": "assistant", "content": fmt.Sprintf("answer %d", round)},
			map[string]any{"role": "user", "content": "And the first line?"})
	}
	s.checkUpstream()
}
