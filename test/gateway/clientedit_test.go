package gateway_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// Client edits (issue 29 item 3): a client that clears its own old tool
// results (Qwen Code's "[Old tool result content cleared]") sends less
// upstream, and the session counts what it sends: one session, the
// history extended (not forked), the usage down by about the cleared
// tokens, and the originals still in the log, expandable byte for byte.

const clearedMarker = "[Old tool result content cleared]"

// bigResult is a tool's multi-KB output, different for each call.
func bigResult(i int) string {
	var b strings.Builder
	for line := 0; b.Len() < 4096; line++ {
		fmt.Fprintf(&b, "file%d.go:%d: func handler%d_%d(w http.ResponseWriter) { return compute(%d) }\n", i, line, i, line, line*i+7)
	}
	return b.String()
}

// editedMessage is a message as GetMessages and ExpandMessage answer it.
type editedMessage struct {
	ID     string `json:"id"`
	Role   string `json:"role"`
	Kind   string `json:"kind"`
	Tokens int64  `json:"tokens,string"`
	Parts  []struct {
		Text *struct {
			Text string `json:"text"`
		} `json:"text"`
		ToolResult *struct {
			ToolCallID string `json:"toolCallId"`
			Content    string `json:"content"`
		} `json:"toolResult"`
	} `json:"parts"`
}

func (m editedMessage) result() (call, content string) {
	for _, p := range m.Parts {
		if p.ToolResult != nil {
			return p.ToolResult.ToolCallID, p.ToolResult.Content
		}
	}
	return "", ""
}

// messagesOf is a session's active view or log.
func (s *server) messagesOf(id, view string) []editedMessage {
	s.t.Helper()
	var page struct {
		Messages []editedMessage `json:"messages"`
	}
	s.rpc("GetMessages", map[string]any{"sessionId": id, "view": view, "pageSize": 1000}, &page)
	return page.Messages
}

// usedTokens is the session's used tokens (GetContextUsage).
func (s *server) usedTokens(id string) int64 {
	s.t.Helper()
	var out struct {
		Usage struct {
			UsedTokens string `json:"usedTokens"`
		} `json:"usage"`
	}
	s.rpc("GetContextUsage", map[string]any{"sessionId": id}, &out)
	n, err := strconv.ParseInt(out.Usage.UsedTokens, 10, 64)
	if err != nil {
		s.t.Fatalf("usedTokens %q: %v", out.Usage.UsedTokens, err)
	}
	return n
}

// checkClearedEdits checks the session after a request that cleared the
// results of calls (their originals: want): the active view holds the
// cleared versions, the usage fell by at least 90 % of what the originals
// counted beyond them (the request also added a reply and a question of
// a few tokens), and each original expands byte for byte.
func checkClearedEdits(t *testing.T, s *server, id string, before int64, want map[string]string) {
	t.Helper()
	var originals int64
	for _, m := range s.messagesOf(id, "MESSAGE_VIEW_LOG") {
		call, content := m.result()
		orig, ok := want[call]
		if !ok {
			continue
		}
		if content != orig {
			t.Errorf("the log's result of %s is not the original (%d bytes, want %d)", call, len(content), len(orig))
		}
		var x struct {
			Message editedMessage `json:"message"`
		}
		s.rpc("ExpandMessage", map[string]any{"sessionId": id, "messageId": m.ID}, &x)
		if _, got := x.Message.result(); got != orig {
			t.Errorf("ExpandMessage(%s) of %s: %d bytes, want the original's %d", m.ID, call, len(got), len(orig))
		}
		originals += m.Tokens
	}
	cleared := 0
	var clearedTokens int64
	for _, m := range s.messagesOf(id, "MESSAGE_VIEW_ACTIVE") {
		call, content := m.result()
		if _, ok := want[call]; !ok {
			continue
		}
		if content != clearedMarker {
			t.Errorf("the active view's result of %s is %d bytes, want the client's cleared version", call, len(content))
		}
		cleared++
		clearedTokens += m.Tokens
	}
	if cleared != len(want) {
		t.Errorf("%d cleared results in the active view, want %d", cleared, len(want))
	}
	after := s.usedTokens(id)
	t.Logf("used tokens %d → %d; the %d results counted %d tokens as originals, %d cleared", before, after, len(want), originals, clearedTokens)
	// A cleared result counts a dozen tokens or so.
	saved := originals - int64(len(want))*20
	if originals < int64(len(want))*500 || clearedTokens > int64(len(want))*20 || before-after < saved*9/10 {
		t.Errorf("used tokens %d → %d (down %d); the cleared results counted %d tokens as originals and %d as cleared: want down by about %d",
			before, after, before-after, originals, clearedTokens, saved)
	}
}

// TestClientClearsOldResultsChat: Chat Completions.
func TestClientClearsOldResultsChat(t *testing.T) {
	s := start(t, nil)
	s.fake.Script(gatewaytest.Reply{Text: "found it"}, gatewaytest.Reply{Text: "fixed"})
	sys := map[string]any{"role": "system", "content": "You are a coding agent."}
	msgs := []any{sys, map[string]any{"role": "user", "content": "Find the bug in the handlers"}}
	originals := map[string]string{}
	var calls []string
	for i := 1; i <= 5; i++ {
		call := fmt.Sprintf("call_read_%d", i)
		calls = append(calls, call)
		originals[call] = bigResult(i)
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"type": "function", "id": call,
				"function": map[string]any{"name": "read_file", "arguments": fmt.Sprintf(`{"path":"file%d.go"}`, i)}}}},
			map[string]any{"role": "tool", "tool_call_id": call, "content": originals[call]})
	}
	resp, reply := chatTurn(t, s, map[string]any{"model": "gpt-4o", "messages": msgs}, nil)
	id := resp.Header.Get("X-Contextd-Session")
	want := []string{"user: Find the bug in the handlers"}
	for _, c := range calls {
		want = append(want, "assistant: call("+c+")", "tool: result("+c+")")
	}
	s.waitLog(id, append(want, "assistant: found it"))
	before := s.usedTokens(id)
	// The client clears the five results and goes on.
	next := append([]any{}, msgs[:2]...)
	for i, m := range msgs[2:] {
		if i%2 == 1 {
			m = map[string]any{"role": "tool", "tool_call_id": calls[i/2], "content": clearedMarker}
		}
		next = append(next, m)
	}
	next = append(next, reply, map[string]any{"role": "user", "content": "Fix it"})
	resp, _ = chatTurn(t, s, map[string]any{"model": "gpt-4o", "messages": next}, nil)
	if h, named := resp.Header.Get("X-Contextd-History"), resp.Header.Get("X-Contextd-Session"); h != "extended" || named != "" {
		t.Fatalf("second turn: history %q, session %q; want extended in the first session", h, named)
	}
	if up := string(s.fake.Requests()[1].Raw); strings.Contains(up, "handler1_0") || strings.Count(up, clearedMarker) != 5 {
		t.Errorf("upstream did not get the client's cleared results: %.2000s", up)
	}
	checkClearedEdits(t, s, id, before, originals)
	var list struct {
		Sessions []any `json:"sessions"`
	}
	s.rpc("ListSessions", map[string]any{}, &list)
	if len(list.Sessions) != 1 {
		t.Errorf("%d sessions, want 1", len(list.Sessions))
	}
	var cmps struct {
		Compactions []any `json:"compactions"`
	}
	s.rpc("ListCompactions", map[string]any{"sessionId": id}, &cmps)
	if len(cmps.Compactions) != 1 {
		t.Errorf("%d compactions, want the one client edit", len(cmps.Compactions))
	}
	s.checkUpstream()
}
