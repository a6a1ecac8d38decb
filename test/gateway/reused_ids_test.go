package gateway_test

import (
	"testing"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// TestReusedCallIDsStayApart: a provider that reuses tool-call ids (call_0,
// as local models and fakes do) gives two conversations with the same
// opening the same call ids; their tool results differ (each read its own
// file). The second conversation is not the first's request again, answered
// from its session ("repeated", the first's log and view), but a session
// of its own. Without comparing results' contents (detailOf) it was
// "repeated".
func TestReusedCallIDsStayApart(t *testing.T) {
	bothStores(t, func(t *testing.T, s *server) {
		s.fake.Script(gatewaytest.Reply{Text: "A: fixed"}, gatewaytest.Reply{Text: "B: fixed"})
		conv := func(file string) map[string]any {
			return map[string]any{"model": "gpt-4o", "messages": []any{
				map[string]any{"role": "system", "content": "You are a coding agent."},
				map[string]any{"role": "user", "content": "Fix the failing test."},
				map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
					"id": "call_0", "type": "function", "function": map[string]any{"name": "read", "arguments": `{"path":"main.go"}`}}}},
				map[string]any{"role": "tool", "tool_call_id": "call_0", "content": file},
			}}
		}
		resp, body := s.post("/v1/chat/completions", conv("package a // conversation A's file"), nil)
		if resp.StatusCode != 200 {
			t.Fatalf("A: %d %s", resp.StatusCode, body)
		}
		resp, body = s.post("/v1/chat/completions", conv("package b // conversation B's file"), nil)
		if resp.StatusCode != 200 {
			t.Fatalf("B: %d %s", resp.StatusCode, body)
		}
		if h := resp.Header.Get("X-Contextd-History"); h == "repeated" || h == "extended" || h == "unchanged" {
			t.Fatalf("B's request landed in A's session (X-Contextd-History: %s)", h)
		}
		// A cleared result is the same conversation: A again, its result
		// cleared as Qwen Code clears it, is A's request again.
		resp, body = s.post("/v1/chat/completions", conv("[Old tool result content cleared]"), nil)
		if resp.StatusCode != 200 {
			t.Fatalf("cleared: %d %s", resp.StatusCode, body)
		}
		if h := resp.Header.Get("X-Contextd-History"); h != "repeated" {
			t.Fatalf("a cleared result: X-Contextd-History %q, want repeated", h)
		}
	})
}
