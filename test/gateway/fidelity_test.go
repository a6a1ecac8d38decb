package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// chatTurn posts a Chat Completions request and returns the response and
// the assistant message of its answer.
func chatTurn(t *testing.T, s *server, body map[string]any, header map[string]string) (*http.Response, map[string]any) {
	t.Helper()
	resp, raw := s.post("/v1/chat/completions", body, header)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, raw)
	}
	var out struct {
		Choices []struct {
			Message map[string]any `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out.Choices) == 0 {
		t.Fatalf("answer: %v %s", err, raw)
	}
	return resp, out.Choices[0].Message
}

// TestTwoAudiosDoNotCollide (issue 29 "Why" 6): Chat Completions audio
// parts are identified by their data, so two different audios in one
// history both go upstream (before, both had one digest and the upstream
// got the second twice and the first never).
func TestTwoAudiosDoNotCollide(t *testing.T) {
	s := start(t, nil)
	audio := func(data string) map[string]any {
		return map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_audio", "input_audio": map[string]any{"data": data, "format": "wav"}}}}
	}
	msgs := []any{audio("AAAA"), map[string]any{"role": "assistant", "content": "heard"}, audio("BBBB")}
	chatTurn(t, s, map[string]any{"model": "gpt-4o", "messages": msgs}, nil)
	raw := string(s.fake.Requests()[0].Raw)
	if strings.Count(raw, "AAAA") != 1 || strings.Count(raw, "BBBB") != 1 {
		t.Errorf("upstream got AAAA %d times and BBBB %d times, want once each: %s", strings.Count(raw, "AAAA"), strings.Count(raw, "BBBB"), raw)
	}
}

// TestBenignResendsStayInTheSession (issue 29 item 3): a client that
// resends its tool call with schema defaults filled in and keys reordered
// (Claude Code's Edit gains "replace_all": false), clears an old tool
// result (Qwen Code), and changes its system prompt between turns (a git
// status) is the same conversation: every turn extends the one session,
// the session's system prompt follows, and what goes upstream is what the
// client sent in that request.
func TestBenignResendsStayInTheSession(t *testing.T) {
	s := start(t, nil)
	edit := gatewaytest.ToolCall{ID: "call_edit", Name: "Edit", Arguments: `{"file_path":"a.go","old_string":"x","new_string":"y"}`}
	s.fake.Script(gatewaytest.Reply{ToolCalls: []gatewaytest.ToolCall{edit}}, gatewaytest.Reply{Text: "edited"}, gatewaytest.Reply{Text: "done"})
	sys := func(status string) map[string]any {
		return map[string]any{"role": "system", "content": "You are a coding agent.\n\ngit status: " + status}
	}
	user := map[string]any{"role": "user", "content": "Fix a.go"}
	resp, call := chatTurn(t, s, map[string]any{"model": "gpt-4o", "messages": []any{sys("clean"), user}}, nil)
	id := resp.Header.Get("X-Contextd-Session")
	result := map[string]any{"role": "tool", "tool_call_id": "call_edit", "content": strings.Repeat("the whole file a.go\n", 50)}
	resp, reply := chatTurn(t, s, map[string]any{"model": "gpt-4o", "messages": []any{sys("clean"), user, call, result}}, nil)
	if h := resp.Header.Get("X-Contextd-History"); h != "extended" {
		t.Fatalf("second turn: %s", h)
	}
	// The third turn: the call re-serialized, the result cleared, the
	// system prompt's git status changed.
	resent := map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"type": "function", "id": "call_edit",
		"function": map[string]any{"name": "Edit", "arguments": `{"new_string": "y", "old_string": "x", "file_path": "a.go", "replace_all": false}`}}}}
	cleared := map[string]any{"role": "tool", "tool_call_id": "call_edit", "content": "[Old tool result content cleared]"}
	next := map[string]any{"role": "user", "content": "Now run the tests"}
	resp, _ = chatTurn(t, s, map[string]any{"model": "gpt-4o", "messages": []any{sys("modified: a.go"), user, resent, cleared, reply, next}}, nil)
	if h, named := resp.Header.Get("X-Contextd-History"), resp.Header.Get("X-Contextd-Session"); h != "extended" || named != "" {
		t.Fatalf("third turn: history %q, session %q; want extended in the first session", h, named)
	}
	want := []string{"user: Fix a.go", "assistant: call(call_edit)", "tool: result(call_edit)", "assistant: edited", "user: Now run the tests", "assistant: done"}
	if got := s.waitLog(id, want); !slices.Equal(got, want) {
		t.Errorf("log:\n got %q\nwant %q", got, want)
	}
	var got struct {
		Session struct {
			SystemPrompt string `json:"systemPrompt"`
		} `json:"session"`
	}
	s.rpc("GetSession", map[string]any{"sessionId": id}, &got)
	if !strings.Contains(got.Session.SystemPrompt, "modified: a.go") {
		t.Errorf("the session's system prompt did not follow: %q", got.Session.SystemPrompt)
	}
	up := string(s.fake.Requests()[2].Raw)
	if !strings.Contains(up, "[Old tool result content cleared]") || strings.Contains(up, "the whole file a.go") || !strings.Contains(up, `replace_all`) {
		t.Errorf("upstream did not get the client's own messages: %s", up)
	}
	var list struct {
		Sessions []any `json:"sessions"`
	}
	s.rpc("ListSessions", map[string]any{}, &list)
	if len(list.Sessions) != 1 {
		t.Errorf("%d sessions, want 1", len(list.Sessions))
	}
	s.checkUpstream()
}

// TestDroppedThinkingIsNotPutBack (issue 29 "Why" 6): an Anthropic client
// that resends a reply without its thinking block is the same
// conversation, and the thinking block it dropped is not sent upstream
// from the stored copy.
func TestDroppedThinkingIsNotPutBack(t *testing.T) {
	s := start(t, nil)
	s.fake.Script(gatewaytest.Reply{Thinking: "secret chain of thought", Text: "four"}, gatewaytest.Reply{Text: "five"})
	user := map[string]any{"role": "user", "content": "2+2?"}
	body := func(msgs ...any) map[string]any {
		return map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": msgs}
	}
	resp, raw := s.post("/v1/messages", body(user), nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, raw)
	}
	reply := map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": "four"}}}
	resp, raw = s.post("/v1/messages", body(user, reply, map[string]any{"role": "user", "content": "and 2+3?"}), nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Contextd-History") != "extended" {
		t.Fatalf("%d %s %s", resp.StatusCode, resp.Header.Get("X-Contextd-History"), raw)
	}
	if up := string(s.fake.Requests()[1].Raw); strings.Contains(up, "secret chain of thought") {
		t.Errorf("the dropped thinking block was put back: %s", up)
	}
}

// TestClaudeCodeSessionHeader (issue 29 item 2): Claude Code's session id
// (its header, or metadata.user_id as 2.1.x writes it) names one session
// per Claude Code session: two with the same opening stay apart, and the
// response names the session their signal derives.
func TestClaudeCodeSessionHeader(t *testing.T) {
	s := start(t, nil)
	body := map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": []any{map[string]any{"role": "user", "content": "hello"}}}
	ids := map[string]bool{}
	for _, h := range []map[string]string{{"X-Claude-Code-Session-Id": "11111111-1111-1111-1111-111111111111"}, {"X-Claude-Code-Session-Id": "22222222-2222-2222-2222-222222222222"}} {
		resp, raw := s.post("/v1/messages", body, h)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, raw)
		}
		ids[resp.Header.Get("X-Contextd-Session")] = true
	}
	// metadata.user_id as Claude Code 2.1 sends it names the same session
	// as its header.
	withMeta := map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": body["messages"],
		"metadata": map[string]any{"user_id": `{"device_id":"d","account_uuid":"","session_id":"22222222-2222-2222-2222-222222222222"}`}}
	resp, raw := s.post("/v1/messages", withMeta, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, raw)
	}
	if len(ids) != 2 || ids[""] || !ids[resp.Header.Get("X-Contextd-Session")] {
		t.Errorf("sessions %v, metadata's %q", ids, resp.Header.Get("X-Contextd-Session"))
	}
}

// TestLongHistoryIsCompactedNotRefused (issue 29 "Why" 4): a conversation
// that arrives with a history past CONTEXTD_MAX_VIEW_WINDOWS times the
// window (a fork, a --continue contextd has not seen) is compacted like any
// other, never refused (before: 400 "... allows 4× ..." on every call).
func TestLongHistoryIsCompactedNotRefused(t *testing.T) {
	models := filepath.Join(t.TempDir(), "models.json")
	if err := os.WriteFile(models, []byte(`{"models": [{"name": "tiny", "provider": "openai", "context_window": 2000, "max_output_tokens": 200, "encoding": "o200k_base", "exact": true}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := start(t, map[string]string{"CONTEXTD_MODELS_FILE": models})
	var msgs []any
	for i := range 40 {
		msgs = append(msgs, map[string]any{"role": "user", "content": fmt.Sprintf("question %d: %s", i, strings.Repeat("please look at the parser again ", 20))},
			map[string]any{"role": "assistant", "content": fmt.Sprintf("answer %d: %s", i, strings.Repeat("the parser reads tokens one by one ", 20))})
	}
	msgs = append(msgs, map[string]any{"role": "user", "content": "and now?"})
	resp, _ := chatTurn(t, s, map[string]any{"model": "tiny", "messages": msgs}, nil)
	if resp.Header.Get("X-Contextd-Compacted") != "true" {
		t.Errorf("not compacted: %v", resp.Header)
	}
	if used, _ := strconv.ParseFloat(resp.Header.Get("X-Contextd-Used-Percent"), 64); used > 100 {
		t.Errorf("%.1f %% of the window sent", used)
	}
	if up := string(s.fake.Requests()[0].Raw); !strings.Contains(up, "and now?") {
		t.Errorf("the last message did not go upstream")
	}
}

// TestInventedCallIDsReachTheClient (issue 29 "Why" 6): tool calls the
// upstream sent without an id get the gateway's, in the answer the client
// gets as in the recorded reply, so the client's next turn (its result
// naming that id) extends the session (before: the client never saw the
// ids and its next turn was refused).
func TestInventedCallIDsReachTheClient(t *testing.T) {
	s := start(t, nil)
	s.fake.Script(gatewaytest.Reply{ToolCalls: []gatewaytest.ToolCall{{Name: "ls", Arguments: `{"path":"src"}`}}}, gatewaytest.Reply{Text: "done"})
	user := map[string]any{"role": "user", "content": "list src"}
	_, call := chatTurn(t, s, map[string]any{"model": "gpt-4o", "messages": []any{user}}, nil)
	calls, _ := call["tool_calls"].([]any)
	if len(calls) != 1 {
		t.Fatalf("answer %v", call)
	}
	id, _ := calls[0].(map[string]any)["id"].(string)
	if id == "" {
		t.Fatalf("the client got a tool call without an id: %v", call)
	}
	result := map[string]any{"role": "tool", "tool_call_id": id, "content": "main.go"}
	resp, raw := s.post("/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": []any{user, call, result}}, nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Contextd-History") != "extended" {
		t.Fatalf("the next turn: %d %s %s", resp.StatusCode, resp.Header.Get("X-Contextd-History"), raw)
	}
}

// TestInventedCallIDsReachTheStreamingClient: tool calls a streamed Chat
// Completion sent without an id get the gateway's in the stream the
// client reads (in each call's first delta), the same ids as the recorded
// reply, so the client's next turn extends the session (before: the
// stream passed the calls on without ids, and the client's next turn,
// with no id or its own, was refused).
func TestInventedCallIDsReachTheStreamingClient(t *testing.T) {
	s := start(t, nil)
	s.fake.Script(gatewaytest.Reply{ToolCalls: []gatewaytest.ToolCall{{Name: "ls", Arguments: `{"path":"src"}`}, {Name: "cat", Arguments: `{"path":"go.mod"}`}}},
		gatewaytest.Reply{Text: "done"})
	user := map[string]any{"role": "user", "content": "list src"}
	resp, raw := s.post("/v1/chat/completions", map[string]any{"model": "gpt-4o", "stream": true, "messages": []any{user}}, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, raw)
	}
	// The calls as an SDK assembles them from the deltas.
	type call struct{ ID, Name, Arguments string }
	var calls []call
	for _, line := range strings.Split(string(raw), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					ToolCalls []struct {
						Index    int    `json:"index"`
						ID       string `json:"id"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		for _, ch := range chunk.Choices {
			for _, tc := range ch.Delta.ToolCalls {
				for len(calls) <= tc.Index {
					calls = append(calls, call{})
				}
				c := &calls[tc.Index]
				if tc.ID != "" {
					c.ID = tc.ID
				}
				c.Name += tc.Function.Name
				c.Arguments += tc.Function.Arguments
			}
		}
	}
	if len(calls) != 2 {
		t.Fatalf("calls %v in %s", calls, raw)
	}
	var toolCalls, results []any
	for _, c := range calls {
		if c.ID == "" {
			t.Fatalf("the client got a streamed tool call without an id: %v", calls)
		}
		toolCalls = append(toolCalls, map[string]any{"id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": c.Arguments}})
		results = append(results, map[string]any{"role": "tool", "tool_call_id": c.ID, "content": "ok"})
	}
	if calls[0].ID == calls[1].ID {
		t.Fatalf("two calls, one id: %v", calls)
	}
	reply := map[string]any{"role": "assistant", "content": nil, "tool_calls": toolCalls}
	resp, raw = s.post("/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": append([]any{user, reply}, results...)}, nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Contextd-History") != "extended" {
		t.Fatalf("the next turn: %d %s %s", resp.StatusCode, resp.Header.Get("X-Contextd-History"), raw)
	}
}

// TestDroppedReasoningIsNotPutBack (issue 29 "Why" 6): a Responses client
// under store:false that resends the history without the reasoning item
// it got is the same conversation, and the item is not put back (OpenAI
// answers a request with such an item 404).
func TestDroppedReasoningIsNotPutBack(t *testing.T) {
	s := start(t, nil)
	s.fake.Script(gatewaytest.Reply{Thinking: "secret reasoning", Text: "four"}, gatewaytest.Reply{Text: "five"})
	user := map[string]any{"role": "user", "content": "2+2?"}
	resp, raw := s.post("/v1/responses", map[string]any{"model": "gpt-4o", "store": false, "input": []any{user}}, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, raw)
	}
	if !strings.Contains(string(raw), "secret reasoning") {
		t.Fatalf("the answer has no reasoning item to drop: %s", raw)
	}
	reply := map[string]any{"type": "message", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": "four"}}}
	resp, raw = s.post("/v1/responses", map[string]any{"model": "gpt-4o", "store": false, "input": []any{user, reply, map[string]any{"role": "user", "content": "and 2+3?"}}}, nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Contextd-History") != "extended" {
		t.Fatalf("%d %s %s", resp.StatusCode, resp.Header.Get("X-Contextd-History"), raw)
	}
	if up := string(s.fake.Requests()[1].Raw); strings.Contains(up, "secret reasoning") {
		t.Errorf("the dropped reasoning item was put back: %s", up)
	}
}
