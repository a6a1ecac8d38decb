package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
	"github.com/contextd/contextd/internal/pgtest"
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
	Pinned bool   `json:"pinned"`
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
// cleared versions, the usage fell by about what the originals
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
	// With an approximate encoding (Claude) the used tokens are the
	// provider's count (anchored), which counts the results a little
	// differently from contextd's estimate of each: 80 %, not all.
	if originals < int64(len(want))*500 || clearedTokens > int64(len(want))*20 || before-after < saved*8/10 {
		t.Errorf("used tokens %d → %d (down %d); the cleared results counted %d tokens as originals and %d as cleared: want down by about %d",
			before, after, before-after, originals, clearedTokens, saved)
	}
}

// editDoor is how a client of one door writes the conversation of the
// client-edit tests: a task, five calls each with its result, the
// model's answer and a question.
type editDoor struct {
	path, model string
	// body is the request of the history whose result i is result(i),
	// followed by tail.
	body func(result func(i int) string, tail ...any) map[string]any
	// reply is the answer as the client resends it, and question the
	// client's next message.
	reply    func(raw []byte) []any
	question any
}

func callID(door string, i int) string { return fmt.Sprintf("%s_read_%d", door, i) }

var editDoors = map[string]editDoor{
	"chat": {path: "/v1/chat/completions", model: "gpt-4o",
		body: func(result func(int) string, tail ...any) map[string]any {
			msgs := []any{map[string]any{"role": "system", "content": "You are a coding agent."},
				map[string]any{"role": "user", "content": "Find the bug in the handlers"}}
			for i := 1; i <= 5; i++ {
				msgs = append(msgs,
					map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"type": "function", "id": callID("chat", i),
						"function": map[string]any{"name": "read_file", "arguments": fmt.Sprintf(`{"path":"file%d.go"}`, i)}}}},
					map[string]any{"role": "tool", "tool_call_id": callID("chat", i), "content": result(i)})
			}
			return map[string]any{"model": "gpt-4o", "messages": append(msgs, tail...)}
		},
		reply: func(raw []byte) []any {
			var out struct {
				Choices []struct {
					Message map[string]any `json:"message"`
				} `json:"choices"`
			}
			if json.Unmarshal(raw, &out) != nil || len(out.Choices) == 0 {
				return nil
			}
			return []any{out.Choices[0].Message}
		},
		question: map[string]any{"role": "user", "content": "Fix it"},
	},
	"messages": {path: "/v1/messages", model: "claude-sonnet-4-5",
		body: func(result func(int) string, tail ...any) map[string]any {
			msgs := []any{map[string]any{"role": "user", "content": "Find the bug in the handlers"}}
			for i := 1; i <= 5; i++ {
				msgs = append(msgs,
					map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": callID("toolu", i),
						"name": "read_file", "input": map[string]any{"path": fmt.Sprintf("file%d.go", i)}}}},
					map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": callID("toolu", i), "content": result(i)}}})
			}
			return map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": "You are a coding agent.", "messages": append(msgs, tail...)}
		},
		reply: func(raw []byte) []any {
			var out struct {
				Content []any `json:"content"`
			}
			if json.Unmarshal(raw, &out) != nil {
				return nil
			}
			return []any{map[string]any{"role": "assistant", "content": out.Content}}
		},
		question: map[string]any{"role": "user", "content": "Fix it"},
	},
	"responses": {path: "/v1/responses", model: "gpt-4o",
		body: func(result func(int) string, tail ...any) map[string]any {
			input := []any{map[string]any{"role": "user", "content": "Find the bug in the handlers"}}
			for i := 1; i <= 5; i++ {
				input = append(input,
					map[string]any{"type": "function_call", "call_id": callID("responses", i), "name": "read_file", "arguments": fmt.Sprintf(`{"path":"file%d.go"}`, i)},
					map[string]any{"type": "function_call_output", "call_id": callID("responses", i), "output": result(i)})
			}
			return map[string]any{"model": "gpt-4o", "store": false, "instructions": "You are a coding agent.", "input": append(input, tail...)}
		},
		reply: func(raw []byte) []any {
			var out struct {
				Output []any `json:"output"`
			}
			if json.Unmarshal(raw, &out) != nil {
				return nil
			}
			return out.Output
		},
		question: map[string]any{"role": "user", "content": "Fix it"},
	},
}

// waitLogLen waits until the session's log holds n messages (the gateway
// records a reply just after relaying it).
func (s *server) waitLogLen(id string, n int) {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(s.logOf(id)) < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}

// TestClientClearsOldResults: through each door, a client clears the
// five multi-KB results of its old calls and goes on. Before, the
// session kept counting the stored results (and so the used percentage,
// the compaction decisions and the bill estimate): the usage did not move.
func TestClientClearsOldResults(t *testing.T) {
	for name, d := range editDoors {
		t.Run(name, func(t *testing.T) {
			s := start(t, nil)
			s.fake.Script(gatewaytest.Reply{Text: "found it"}, gatewaytest.Reply{Text: "fixed"}, gatewaytest.Reply{Text: "fixed"})
			originals := map[string]string{}
			post := func(body map[string]any, session string) (*http.Response, []byte) {
				t.Helper()
				resp, raw := s.post(d.path, body, map[string]string{"X-Contextd-Session": session})
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%d %s", resp.StatusCode, raw)
				}
				return resp, raw
			}
			resp, raw := post(d.body(func(i int) string { return bigResult(i) }), "edits")
			id := resp.Header.Get("X-Contextd-Session")
			n := 12 // the task, five calls and results, the answer
			s.waitLogLen(id, n)
			for _, m := range s.messagesOf(id, "MESSAGE_VIEW_LOG") {
				if call, content := m.result(); call != "" {
					originals[call] = content
				}
			}
			before := s.usedTokens(id)
			// The client clears the five results and goes on.
			cleared := d.body(func(int) string { return clearedMarker }, append(d.reply(raw), d.question)...)
			resp, _ = post(cleared, "edits")
			if h, named := resp.Header.Get("X-Contextd-History"), resp.Header.Get("X-Contextd-Session"); h != "extended" || named != id {
				t.Fatalf("second turn: history %q, session %q; want extended in %s", h, named, id)
			}
			if up := string(s.fake.Requests()[1].Raw); strings.Contains(up, "handler1_0") || strings.Count(up, clearedMarker) != 5 {
				t.Errorf("upstream did not get the client's cleared results: %.2000s", up)
			}
			s.waitLogLen(id, n+2)
			checkClearedEdits(t, s, id, before, originals)
			// A client that sent the cleared results from the start: its
			// session counts what this one does, token for token.
			resp, _ = post(cleared, "control")
			control := resp.Header.Get("X-Contextd-Session")
			s.waitLogLen(control, n+2)
			// (Within a cache mark's bytes: contextd marks the two
			// sessions' prompts in other places, and an approximate
			// encoding's usage is the provider's count of the prompt.)
			if a, b := s.usedTokens(id), s.usedTokens(control); a < b-16 || a > b+16 {
				t.Errorf("the edited session counts %d tokens, a session of the cleared history from the start %d", a, b)
			}
			var cmps struct {
				Compactions []struct {
					Tiers []string `json:"tiers"`
				} `json:"compactions"`
			}
			s.rpc("ListCompactions", map[string]any{"sessionId": id}, &cmps)
			if len(cmps.Compactions) != 1 || len(cmps.Compactions[0].Tiers) != 1 {
				t.Errorf("compactions %+v, want the one client edit", cmps.Compactions)
			}
			s.checkUpstream()
		})
	}
}

// TestClientEditsAcrossReplicas: the cleared request reaches two replicas
// on one PostgreSQL database at once (a client's retry racing it): both
// answer, one session, the edits recorded once (the version check: the
// second replica matches again and finds nothing left to edit), every
// message in the log once.
func TestClientEditsAcrossReplicas(t *testing.T) {
	url := pgtest.URL(t)
	a := start(t, map[string]string{"CONTEXTD_DATABASE_URL": url})
	b := start(t, map[string]string{"CONTEXTD_DATABASE_URL": url})
	d := editDoors["chat"]
	sig := map[string]string{"X-Contextd-Session": "edits"}
	a.fake.Script(gatewaytest.Reply{Text: "found it"}, gatewaytest.Reply{Text: "fixed"})
	b.fake.Script(gatewaytest.Reply{Text: "fixed"})
	resp, raw := a.post(d.path, d.body(bigResult), sig)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, raw)
	}
	id := resp.Header.Get("X-Contextd-Session")
	a.waitLogLen(id, 12)
	before := a.usedTokens(id)
	cleared := d.body(func(int) string { return clearedMarker }, append(d.reply(raw), d.question)...)
	var wg sync.WaitGroup
	for _, s := range []*server{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, raw := s.post(d.path, cleared, sig)
			if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Contextd-Session") != id {
				t.Errorf("%d in %q (%s): %s", resp.StatusCode, resp.Header.Get("X-Contextd-Session"), resp.Header.Get("X-Contextd-History"), raw)
			}
		}()
	}
	wg.Wait()
	a.waitLogLen(id, 14)
	var cmps struct {
		Compactions []struct {
			Tiers []string `json:"tiers"`
			Items []any    `json:"items"`
		} `json:"compactions"`
	}
	a.rpc("ListCompactions", map[string]any{"sessionId": id}, &cmps)
	if len(cmps.Compactions) != 1 || len(cmps.Compactions[0].Items) != 5 {
		t.Errorf("compactions %+v, want one client edit of the five results", cmps.Compactions)
	}
	log := a.logOf(id)
	if len(log) < 14 || log[12] != "user: Fix it" || slices.Contains(log[14:], "user: Fix it") {
		t.Errorf("log: %q", log)
	}
	if after := a.usedTokens(id); before-after < 5000 {
		t.Errorf("used tokens %d → %d, want down by the cleared results", before, after)
	}
	a.checkUpstream()
	b.checkUpstream()
}

// TestCountTokensCountsClearedResults: count_tokens for a request that
// clears old results counts them cleared, as the request would be sent
// (before, the session's stored copies were counted: the five 4 KB
// results as if still there).
func TestCountTokensCountsClearedResults(t *testing.T) {
	s := start(t, nil)
	d := editDoors["messages"]
	s.fake.Script(gatewaytest.Reply{Text: "found it"})
	resp, raw := s.post(d.path, d.body(bigResult), nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, raw)
	}
	s.waitLogLen(resp.Header.Get("X-Contextd-Session"), 12)
	count := func(body map[string]any) int64 {
		t.Helper()
		resp, raw := s.post("/v1/messages/count_tokens", body, nil)
		var out struct {
			InputTokens int64 `json:"input_tokens"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &out) != nil {
			t.Fatalf("count_tokens: %d %s", resp.StatusCode, raw)
		}
		return out.InputTokens
	}
	tail := append(d.reply(raw), d.question)
	full := count(d.body(bigResult, tail...))
	cleared := count(d.body(func(int) string { return clearedMarker }, tail...))
	if full-cleared < 5000 {
		t.Errorf("count_tokens: %d with the results, %d with them cleared; want about 6,000 fewer", full, cleared)
	}
}

// TestSummaryCoversClientEdits: a summary over client-edited messages is
// contextd's: the next request sends the summary in their place (not the
// client's cleared results, nor the originals), and every message of the
// view it sends is the view's as counted.
func TestSummaryCoversClientEdits(t *testing.T) {
	s := start(t, nil)
	d := editDoors["chat"]
	s.fake.Script(gatewaytest.Reply{Text: "found it"}, gatewaytest.Reply{Text: "fixed"}, gatewaytest.Reply{Text: "they pass"})
	resp, raw := s.post(d.path, d.body(bigResult), nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, raw)
	}
	id := resp.Header.Get("X-Contextd-Session")
	s.waitLogLen(id, 12)
	// The client clears the first three results and keeps the two newest.
	clear3 := func(i int) string {
		if i <= 3 {
			return clearedMarker
		}
		return bigResult(i)
	}
	tail := append(d.reply(raw), d.question)
	resp, raw = s.post(d.path, d.body(clear3, tail...), nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, raw)
	}
	s.waitLogLen(id, 14)
	var c struct {
		Compacted bool `json:"compacted"`
	}
	s.rpc("Compact", map[string]any{"sessionId": id, "tier": "COMPACTION_TIER_SUMMARIZE", "target": 0.01}, &c)
	if !c.Compacted {
		t.Fatal("the summary compacted nothing")
	}
	var cmps struct {
		Compactions []struct {
			Tiers []string `json:"tiers"`
			Items []struct {
				Replaced []string `json:"replacedMessageIds"`
			} `json:"items"`
		} `json:"compactions"`
	}
	s.rpc("ListCompactions", map[string]any{"sessionId": id}, &cmps)
	covered := 0
	for _, cmp := range cmps.Compactions {
		for _, it := range cmp.Items {
			for _, r := range it.Replaced {
				if strings.HasPrefix(r, "edit_") && slices.Contains(cmp.Tiers, "summarize") {
					covered++
				}
			}
		}
	}
	if covered != 3 {
		t.Errorf("the summary covers %d of the three edits: %+v", covered, cmps.Compactions)
	}
	view := s.messagesOf(id, "MESSAGE_VIEW_ACTIVE") // what the next request sends, before its question
	tail = append(tail, d.reply(raw)...)
	tail = append(tail, map[string]any{"role": "user", "content": "And the tests?"})
	resp, raw = s.post(d.path, d.body(clear3, tail...), nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Contextd-History") != "extended" {
		t.Fatalf("third turn: %d %s %s", resp.StatusCode, resp.Header.Get("X-Contextd-History"), raw)
	}
	up := string(s.fake.Requests()[2].Raw)
	summaries := 0
	for _, m := range view {
		if m.Kind == "MESSAGE_KIND_SUMMARY" {
			summaries++
		}
		for _, p := range m.Parts {
			if p.Text != nil && !strings.Contains(up, jsonText(p.Text.Text)) {
				t.Errorf("the view's %s (%s) is not what went upstream: %.300q", m.ID, m.Kind, p.Text.Text)
			}
			if p.ToolResult != nil && !strings.Contains(up, jsonText(p.ToolResult.Content)) {
				t.Errorf("the view's result %s is not what went upstream", m.ID)
			}
		}
	}
	if summaries != 1 || strings.Contains(up, "handler1_0") || strings.Count(up, clearedMarker) >= 3 {
		t.Errorf("upstream after the summary: %d summaries in the view, %d cleared results sent: %.3000s", summaries, strings.Count(up, clearedMarker), up)
	}
	s.checkUpstream()
}

// jsonText is s as it appears inside a JSON string.
func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// TestFailedRequestKeepsNoEdits: a request whose client edits were
// recorded but whose append is then refused (its new message does not fit
// CONTEXTD_MAX_VIEW_BYTES on top of the view) changes nothing: the edits
// are reverted, the view and its count are as before.
func TestFailedRequestKeepsNoEdits(t *testing.T) {
	s := start(t, map[string]string{"CONTEXTD_MAX_VIEW_BYTES": "40000"})
	id, before, second := s.overBoundTurn(editDoors["chat"])
	resp, raw := s.post("/v1/chat/completions", second, map[string]string{"X-Contextd-Session": "edits"})
	if resp.StatusCode == http.StatusOK {
		t.Fatalf("the request over the view bound was served: %s", raw)
	}
	t.Logf("%d %s", resp.StatusCode, raw)
	s.checkNoEdits(id, before)
}

// checkNoEdits checks that a failed request changed nothing: every
// compaction of session id is reverted and its used tokens are before.
func (s *server) checkNoEdits(id string, before int64) {
	s.t.Helper()
	var cmps struct {
		Compactions []struct {
			ID         string `json:"id"`
			RevertedAt string `json:"revertedAt"`
		} `json:"compactions"`
	}
	s.rpc("ListCompactions", map[string]any{"sessionId": id}, &cmps)
	for _, c := range cmps.Compactions {
		if c.RevertedAt == "" {
			s.t.Errorf("an edit of the failed request is still applied: %+v", cmps.Compactions)
		}
	}
	if after := s.usedTokens(id); after != before {
		s.t.Errorf("used tokens %d → %d after a failed request; want unchanged", before, after)
	}
}

// overBoundTurn is the first turn of a session named "edits" (five 4 KB
// results) and the second, which clears them and adds a message that fits
// a CONTEXTD_MAX_VIEW_BYTES of 40,000 alone but not on top of the view:
// the session's id and used tokens after the first, and the second's body.
func (s *server) overBoundTurn(d editDoor) (id string, before int64, second map[string]any) {
	s.t.Helper()
	s.fake.Script(gatewaytest.Reply{Text: "found it"})
	resp, raw := s.post(d.path, d.body(bigResult), map[string]string{"X-Contextd-Session": "edits"})
	if resp.StatusCode != http.StatusOK {
		s.t.Fatalf("%d %s", resp.StatusCode, raw)
	}
	id = resp.Header.Get("X-Contextd-Session")
	s.waitLogLen(id, 12)
	huge := map[string]any{"role": "user", "content": strings.Repeat("paste ", 6300)} // 37,800 bytes
	return id, s.usedTokens(id), d.body(func(int) string { return clearedMarker }, append(d.reply(raw), huge)...)
}
