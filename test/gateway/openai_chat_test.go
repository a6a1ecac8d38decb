package gateway_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// TestChatHistoryLandsInOneSession: an unmodified client that resends the
// whole history each call (no session header) lands in one session; only
// what is new is appended; the reply is recorded so the next call matches.
func TestChatHistoryLandsInOneSession(t *testing.T) {
	s := start(t, nil)
	s.fake.Script(gatewaytest.Reply{Text: "Hello! How can I help?"},
		gatewaytest.Reply{ToolCalls: []gatewaytest.ToolCall{{ID: "call_1", Name: "ls", Arguments: `{"path": "."}`}}},
		gatewaytest.Reply{Text: "There are two files."})
	history := []map[string]any{
		{"role": "system", "content": "You are terse."},
		{"role": "user", "content": "hi"},
	}
	var id string
	call := func(wantHistory string) map[string]any {
		t.Helper()
		resp, body := s.post("/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": history}, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
		if got := resp.Header.Get("X-Contextd-History"); got != wantHistory {
			t.Errorf("X-Contextd-History = %q, want %q", got, wantHistory)
		}
		if id == "" {
			id = resp.Header.Get("X-Contextd-Session")
		} else if got := resp.Header.Get("X-Contextd-Session"); got != "" {
			t.Errorf("a session found by history was named: %q", got)
		}
		var out struct {
			Choices []struct {
				Message map[string]any `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(body, &out); err != nil || len(out.Choices) == 0 {
			t.Fatalf("answer: %v %s", err, body)
		}
		return out.Choices[0].Message
	}
	reply := call("new")
	history = append(history, reply, map[string]any{"role": "user", "content": "list files"})
	reply = call("extended")
	history = append(history, reply, map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "a.go b.go"})
	call("extended")
	want := []string{"user: hi", "assistant: Hello! How can I help?", "user: list files", "assistant: call(call_1)", "tool: result(call_1)", "assistant: There are two files."}
	if got := s.waitLog(id, want); !slices.Equal(got, want) {
		t.Errorf("log:\n got %q\nwant %q", got, want)
	}
	s.checkUpstream()
	reqs := s.fake.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d upstream requests", len(reqs))
	}
	if got := reqs[2].Header.Get("Authorization"); got != "Bearer sk-test" {
		t.Errorf("provider credentials not forwarded: %q", got)
	}
}
