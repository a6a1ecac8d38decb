package clients

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/tokens"
)

// The scripted provider refuses what the providers refuse and bills
// prompt caching as they do (it runs without the CLIs).
func newTestProvider(t *testing.T, window int64) *Provider {
	enc, err := tokens.LoadEncoding("o200k_base")
	if err != nil {
		t.Fatal(err)
	}
	p := NewProvider(enc, window)
	t.Cleanup(p.Close)
	return p
}

func post(t *testing.T, p *Provider, path string, body any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, p.URL()+path, bytes.NewReader(b))
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out
}

var bashTool = map[string]any{"name": "Bash", "input_schema": map[string]any{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}}}

func TestProviderPlaysTheScript(t *testing.T) {
	p := newTestProvider(t, 100000)
	human := map[string]any{"role": "user", "content": "TASK=t ROUNDS=2 DIR=/tmp/x go"}
	body := map[string]any{"model": "m", "max_tokens": 100, "tools": []any{bashTool}, "messages": []any{human}}
	_, out := post(t, p, "/v1/messages", body)
	content, _ := out["content"].([]any)
	call, _ := content[len(content)-1].(map[string]any)
	id, _ := call["id"].(string)
	if call["type"] != "tool_use" || call["name"] != "Bash" || !strings.HasPrefix(id, "toolu_r1of2_") {
		t.Fatalf("round 1: %v", out)
	}
	result := map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": "out"}}}
	body["messages"] = []any{human, map[string]any{"role": "assistant", "content": content}, result}
	_, out = post(t, p, "/v1/messages", body)
	content, _ = out["content"].([]any)
	call, _ = content[len(content)-1].(map[string]any)
	id2, _ := call["id"].(string)
	if !strings.HasPrefix(id2, "toolu_r2of2_") {
		t.Fatalf("round 2: %v", out)
	}
	result2 := map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id2, "content": "out"}}}
	body["messages"] = append(body["messages"].([]any), map[string]any{"role": "assistant", "content": content}, result2)
	_, out = post(t, p, "/v1/messages", body)
	content, _ = out["content"].([]any)
	if text, _ := content[0].(map[string]any)["text"].(string); text != Final("t", 2) {
		t.Fatalf("final: %v", out)
	}
}

func TestProviderRefuses(t *testing.T) {
	p := newTestProvider(t, 2000)
	human := map[string]any{"role": "user", "content": "TASK=t ROUNDS=1 DIR=/tmp/x go"}
	use := map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": map[string]any{}}}}
	mark := map[string]any{"type": "ephemeral"}
	marked := []any{}
	for range 5 {
		marked = append(marked, map[string]any{"type": "text", "text": "x", "cache_control": mark})
	}
	for name, tc := range map[string]struct {
		path string
		body map[string]any
		want string
	}{
		"unanswered tool_use": {"/v1/messages", map[string]any{"max_tokens": 1, "messages": []any{human, use, human}}, "without tool_result"},
		"two user messages":   {"/v1/messages", map[string]any{"max_tokens": 1, "messages": []any{human, human}}, "alternate"},
		"five cache marks":    {"/v1/messages", map[string]any{"max_tokens": 1, "messages": []any{map[string]any{"role": "user", "content": marked}}}, "maximum of 4"},
		"over the window":     {"/v1/messages", map[string]any{"max_tokens": 1, "messages": []any{map[string]any{"role": "user", "content": strings.Repeat("word ", 3000)}}}, "prompt is too long"},
		"output of no call": {"/v1/responses", map[string]any{"input": []any{map[string]any{"type": "function_call_output", "call_id": "c1", "output": "x"}}},
			"No tool call found"},
		"lost reasoning item": {"/v1/responses", map[string]any{"store": false, "input": []any{map[string]any{"type": "reasoning", "id": "rs_1", "summary": []any{}}}},
			"not persisted"},
		"unanswered tool call": {"/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "x"},
			map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"id": "c1", "type": "function"}}}, map[string]any{"role": "user", "content": "y"}}},
			"did not have response messages"},
	} {
		status, out := post(t, p, tc.path, tc.body)
		e, _ := out["error"].(map[string]any)
		msg, _ := e["message"].(string)
		if status != http.StatusBadRequest || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %d %v, want 400 with %q", name, status, out, tc.want)
		}
	}
}

func TestProviderBillsCaching(t *testing.T) {
	p := newTestProvider(t, 100000)
	long := strings.Repeat("the same long opening of the conversation ", 300)
	mark := map[string]any{"type": "ephemeral"}
	req := func(extra string) map[string]any {
		return map[string]any{"max_tokens": 1, "messages": []any{map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": long, "cache_control": mark},
			map[string]any{"type": "text", "text": "TASK=t ROUNDS=0 DIR=/x " + extra}}}}}
	}
	_, first := post(t, p, "/v1/messages", req("a"))
	_, second := post(t, p, "/v1/messages", req("b"))
	u1, _ := first["usage"].(map[string]any)
	u2, _ := second["usage"].(map[string]any)
	if u1["cache_creation_input_tokens"].(float64) < 1024 || u1["cache_read_input_tokens"].(float64) != 0 {
		t.Errorf("first: %v, want the marked prefix written", u1)
	}
	if u2["cache_read_input_tokens"] != u1["cache_creation_input_tokens"] || u2["cache_creation_input_tokens"].(float64) != 0 || u2["input_tokens"].(float64) == 0 {
		t.Errorf("second: %v, want the prefix read and the rest uncached (first %v)", u2, u1)
	}
	calls := p.Calls()
	if in := calls[1].Billed.Input(); in != int64(u2["input_tokens"].(float64)+u2["cache_read_input_tokens"].(float64)) {
		t.Errorf("billed %+v, reported %v", calls[1].Billed, u2)
	}
}
