package clients

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestFramingIsTheProvidersCount: a request whose view no report has
// anchored (a conversation's first, or the first after a compaction) is
// counted by contextd exactly as the provider counts it, framing and all:
// each door's request of a system prompt, a tool, a call and its result
// and messages around them (a message with a name), through a window so
// small (usable 298 tokens) that X-Contextd-Used-Percent's one decimal is
// a third of a token: a count a token off fails (the tolerance is the
// header's rounding; at usable 900 with half a token more, a token's
// difference passed). The provider's count is pinned to the real API's
// (TestProviderCountsAsOpenAIMeasured). Without the
// fix the provider counted a newline after every string it read (a role,
// a text, a call's name and arguments; each property of a tool) and no
// reply priming: about a token more per message than the published rule
// contextd counts, which added up to 0.1 point of the window on the
// suite's conversations (the used % right after a compaction, logged by
// checks_test.go).
func TestFramingIsTheProvidersCount(t *testing.T) {
	system := strings.Repeat("You are a careful coding agent. ", 6)
	fn := map[string]any{"name": "shell", "description": "Run a shell command.",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{
			"cmd":     map[string]any{"type": "string", "description": "The command."},
			"timeout": map[string]any{"type": "integer"}}}}
	chatBody := map[string]any{"tools": []any{map[string]any{"type": "function", "function": fn}}, "messages": []any{
		map[string]any{"role": "system", "content": system},
		map[string]any{"role": "user", "content": "Fix the failing test in calc.py."},
		map[string]any{"role": "assistant", "content": "I will run the tests.", "tool_calls": []any{map[string]any{"id": "call_1", "type": "function",
			"function": map[string]any{"name": "shell", "arguments": `{"cmd":"pytest -q"}`}}}},
		map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "1 failed, 3 passed"},
		map[string]any{"role": "user", "name": "alice", "content": "Go on."}}}
	responsesBody := map[string]any{"instructions": system,
		"tools": []any{map[string]any{"type": "function", "name": "shell", "description": fn["description"], "parameters": fn["parameters"]}},
		"input": []any{
			map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "Fix the failing test in calc.py."}}},
			map[string]any{"type": "function_call", "call_id": "call_1", "name": "shell", "arguments": `{"cmd":"pytest -q"}`},
			map[string]any{"type": "function_call_output", "call_id": "call_1", "output": "1 failed, 3 passed"},
			map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "Go on."}}}}}
	anthropicBody := map[string]any{"max_tokens": 100, "system": system,
		"tools": []any{map[string]any{"name": "shell", "description": fn["description"], "input_schema": fn["parameters"]}},
		"messages": []any{
			map[string]any{"role": "user", "content": "Fix the failing test in calc.py."},
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": "I will run the tests."},
				map[string]any{"type": "tool_use", "id": "toolu_1", "name": "shell", "input": map[string]any{"cmd": "pytest -q"}}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "content": "1 failed, 3 passed"}}},
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "toolu_2", "name": "shell", "input": map[string]any{"cmd": "cat calc.py"}}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_2", "content": "def add(a, b): return a - b"},
				map[string]any{"type": "text", "text": "Go on."}}}}}
	for _, tc := range []struct {
		door, path string
		m          model
		body       map[string]any
	}{
		{"chat", "/v1/chat/completions", model{Name: "tiny", Provider: "openai", ContextWindow: 350, MaxOutput: 100, Encoding: "o200k_base", Exact: true}, chatBody},
		{"responses", "/v1/responses", model{Name: "tiny", Provider: "openai", ContextWindow: 350, MaxOutput: 100, Encoding: "o200k_base", Exact: true}, responsesBody},
		{"anthropic", "/v1/messages", model{Name: "tiny", Provider: "anthropic", ContextWindow: 350, MaxOutput: 100, Encoding: "o200k_base", Exact: true, Framing: &anthropicFraming}, anthropicBody},
	} {
		t.Run(tc.door, func(t *testing.T) {
			r := startRig(t, tc.m, nil)
			tc.body["model"] = tc.m.Name
			b, _ := json.Marshal(tc.body)
			req, _ := http.NewRequest(http.MethodPost, r.front+tc.path, bytes.NewReader(b))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer sk-fake")
			req.Header.Set("x-api-key", "sk-ant-fake")
			req.Header.Set("anthropic-version", "2023-06-01")
			req.Header.Set("X-Contextd-Session", "framing")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			calls := r.provider.Calls()
			if resp.StatusCode != http.StatusOK || len(calls) != 1 || len(calls[0].Problems) > 0 {
				t.Fatalf("%d %.300s; the provider's calls: %+v", resp.StatusCode, out, calls)
			}
			used, err := strconv.ParseFloat(strings.TrimSuffix(resp.Header.Get("X-Contextd-Used-Percent"), "%"), 64)
			if err != nil {
				t.Fatalf("X-Contextd-Used-Percent %q: %v", resp.Header.Get("X-Contextd-Used-Percent"), err)
			}
			usable := r.usable("framing")
			counted := calls[0].Billed.Input()
			if got := used * float64(usable) / 100; math.Abs(got-float64(counted)) > 0.5*float64(usable)/1000+0.01 {
				t.Errorf("used %.1f %% of %d usable (%.1f tokens), the provider counted %d", used, usable, got, counted)
			}
		})
	}
}
