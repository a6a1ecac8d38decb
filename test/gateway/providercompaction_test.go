package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
	"github.com/contextd/contextd/internal/pgtest"
)

// Provider compaction items (issue 29 item 5). Anthropic's server-side
// compaction answers with a `compaction` block; on later requests the API
// ignores every message before the latest such block. The gateway carries
// the block byte for byte, counts its summary, and records the messages
// before it as compacted by the provider: they count nothing (the used
// count after a call is what the provider counted), they are never
// summarized by contextd, and they still go upstream as the client sent
// them.

// anText is an Anthropic message of one text block.
func anText(role, text string) map[string]any {
	return map[string]any{"role": role, "content": []map[string]any{{"type": "text", "text": text}}}
}

// TestAnthropicCompactionBlockNotCharged: three long turns, the third
// answered with a compaction block, then two more turns that send the
// whole history back with the block. After each of those calls the
// session's used count is the fake's count (which, as the API, ignores
// what is before the block) within 1 % (or the few tokens of the reply
// appended since), every message goes upstream as the client sent it
// (the block byte for byte), the messages before the block count 0 in the view and the log keeps them. Without the fix the
// used count was the whole history's (the provider's report, under half
// of it, is not an anchor): about 5× the provider's.
func TestAnthropicCompactionBlockNotCharged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream bool
		pg     bool
	}{{"json", false, false}, {"stream", true, false}, {"postgres", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			var env map[string]string
			if tc.pg {
				env = map[string]string{"CONTEXTD_DATABASE_URL": pgtest.URL(t)}
			}
			s := start(t, env)
			stream := tc.stream
			session, msgs := compactedConversation(t, s, "claude-sonnet-4-5", stream, func(turn int) string {
				return fmt.Sprintf("Turn %d: now the tests for mul().", turn)
			})
			// The view: the messages before the block count nothing and
			// are contextd's record of the provider's compaction; the log
			// keeps them as they were.
			view := s.messagesOf(session, "MESSAGE_VIEW_ACTIVE")
			if len(view) != msgs {
				t.Fatalf("view of %d messages, the client has %d", len(view), msgs)
			}
			for i, m := range view {
				if dropped := i < 5; dropped != (m.Tokens == 0) {
					t.Errorf("view message %d (%s %s) counts %d tokens", i, m.Role, m.ID, m.Tokens)
				}
			}
			for i, m := range s.messagesOf(session, "MESSAGE_VIEW_LOG")[:5] {
				if m.Tokens == 0 || i%2 == 0 && !strings.Contains(m.Parts[0].Text.Text, "here is the output") {
					t.Errorf("log message %d changed: %d tokens, %+v", i, m.Tokens, m.Parts)
				}
			}
			checkOnlyProviderCompaction(t, s, session)
		})
	}
}

// TestProviderDroppedMessagesAreNotCompacted: through a window of 7,000
// tokens, three turns of 1,200 tokens each (half the window), the third
// answered with a compaction block, then two more such turns. The
// provider reads only the last two turns: the session is never compacted
// by contextd (the messages before the block are not summarized, and go
// upstream as the client sent them). Without the fix the whole history
// counted (over 85 % by the fifth turn: the summarize tier) and contextd summarized what the
// provider had already dropped.
func TestProviderDroppedMessagesAreNotCompacted(t *testing.T) {
	models := t.TempDir() + "/models.json"
	if err := os.WriteFile(models, []byte(`{"models": [{"name": "small-claude", "provider": "anthropic", "context_window": 7000, "max_output_tokens": 500, "encoding": "cl100k_base"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := start(t, map[string]string{"CONTEXTD_MODELS_FILE": models})
	session, _ := compactedConversation(t, s, "small-claude", false, func(turn int) string {
		return fmt.Sprintf("Turn %d: here is more output.\n%s", turn, bigResult(turn))
	})
	checkOnlyProviderCompaction(t, s, session)
}

// compactedConversation holds, with model, three long turns, the third answered with a
// compaction block, then two more turns (their prompts: later) that send
// the whole history back with the block, and checks each of those: every
// message goes upstream as the client sent it (the block byte for byte),
// contextd did not compact, and the session's used count after the call
// is the fake's count (which, as the API, ignores what is before the
// block) within 1 % (or the few tokens of the reply appended since). It
// returns the session and the client's message count.
func compactedConversation(t *testing.T, s *server, model string, stream bool, later func(turn int) string) (string, int) {
	t.Helper()
	const summary = "Summary: the user is fixing calc.py; add() subtracted, now fixed; tests for mul() remain."
	var msgs []map[string]any
	session := ""
	ask := func(turn int, prompt string) []byte {
		t.Helper()
		msgs = append(msgs, anText("user", prompt))
		body := map[string]any{"model": model, "max_tokens": 500, "stream": stream, "messages": msgs}
		raw, _ := json.Marshal(body)
		resp, out := s.post("/v1/messages", raw, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("turn %d: %d %s", turn, resp.StatusCode, out)
		}
		if id := resp.Header.Get("X-Contextd-Session"); id != "" {
			if session != "" && id != session {
				t.Fatalf("turn %d: session %s, first %s", turn, id, session)
			}
			session = id
		}
		if h := resp.Header.Get("X-Contextd-History"); turn > 0 && h != "extended" {
			t.Fatalf("turn %d: history %q", turn, h)
		}
		if c := resp.Header.Get("X-Contextd-Compacted"); c != "false" {
			t.Fatalf("turn %d: compacted %q (%s%% used)", turn, c, resp.Header.Get("X-Contextd-Used-Percent"))
		}
		return raw
	}
	// The assistant's message as the client keeps it: the answer's
	// content blocks.
	reply := func(text, compaction string) {
		var content []map[string]any
		if compaction != "" {
			content = append(content, map[string]any{"type": "compaction", "content": compaction})
		}
		content = append(content, map[string]any{"type": "text", "text": text})
		msgs = append(msgs, map[string]any{"role": "assistant", "content": content})
	}
	for turn := range 3 {
		compaction := ""
		if turn == 2 {
			compaction = summary
		}
		s.fake.Script(gatewaytest.Reply{Text: fmt.Sprintf("turn %d done", turn), Compaction: compaction})
		ask(turn, fmt.Sprintf("Turn %d: here is the output.\n%s", turn, bigResult(turn)))
		reply(fmt.Sprintf("turn %d done", turn), compaction)
	}
	if session == "" {
		t.Fatal("no session named")
	}
	for turn := 3; turn < 5; turn++ {
		s.fake.Script(gatewaytest.Reply{Text: fmt.Sprintf("turn %d done", turn)})
		sent := ask(turn, later(turn))
		reply(fmt.Sprintf("turn %d done", turn), "")
		reqs := s.fake.Requests()
		last := reqs[len(reqs)-1]
		var got, want struct {
			Messages json.RawMessage `json:"messages"`
		}
		_ = json.Unmarshal(last.Raw, &got)
		_ = json.Unmarshal(sent, &want)
		if g, w := withoutMarks(got.Messages), withoutMarks(want.Messages); !reflect.DeepEqual(g, w) {
			t.Fatalf("turn %d: upstream messages differ from the client's (cache marks aside): %d of %d bytes", turn, len(got.Messages), len(want.Messages))
		}
		block, _ := json.Marshal(map[string]any{"content": summary, "type": "compaction"})
		if !bytes.Contains(last.Raw, block) {
			t.Fatalf("turn %d: the compaction block did not go upstream as sent: %s", turn, last.Raw)
		}
		used := s.used(session, len(msgs))
		bill := last.Bill.Input()
		// Within 1 %, or the reply appended since (a few tokens).
		if off := math.Abs(float64(used - bill)); off > max(0.01*float64(bill), 12) {
			t.Errorf("turn %d: used %d tokens after the call; the provider counted %d", turn, used, bill)
		}
	}
	s.checkUpstream()
	return session, len(msgs)
}

// checkOnlyProviderCompaction checks that the session's one compaction is
// the record of the provider's.
func checkOnlyProviderCompaction(t *testing.T, s *server, session string) {
	t.Helper()
	var comps struct {
		Compactions []struct {
			Tiers []string `json:"tiers"`
		} `json:"compactions"`
	}
	s.rpc("ListCompactions", map[string]any{"sessionId": session}, &comps)
	if len(comps.Compactions) != 1 || strings.Join(comps.Compactions[0].Tiers, ",") != "provider_compaction" {
		t.Errorf("compactions: %+v (want one, of tier provider_compaction)", comps)
	}
}

// withoutMarks is a JSON array of messages, decoded, without the
// cache_control marks the gateway places.
func withoutMarks(raw json.RawMessage) any {
	var v any
	_ = json.Unmarshal(raw, &v)
	var drop func(v any)
	drop = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			delete(x, "cache_control")
			for _, e := range x {
				drop(e)
			}
		case []any:
			for _, e := range x {
				drop(e)
			}
		}
	}
	drop(v)
	return v
}

// TestProviderCompactionInANewConversation: a conversation contextd has
// not seen (a client that moved to the gateway after the provider
// compacted it) arrives with a compaction block: its messages before the
// block are appended counting nothing, so the used count after the call
// is the provider's. Without the fix it was the whole history's.
func TestProviderCompactionInANewConversation(t *testing.T) {
	s := start(t, nil)
	msgs := []map[string]any{anText("user", "Turn 0: here is the output.\n"+bigResult(0)), anText("assistant", "turn 0 done"),
		{"role": "assistant", "content": []map[string]any{{"type": "compaction", "content": "Summary: calc.py is fixed."}, {"type": "text", "text": "turn 1 done"}}},
		anText("user", "Turn 2: now mul().")}
	// Roles alternate: the two assistant messages are one.
	msgs = append(msgs[:1], msgs[2:]...)
	resp, out := s.post("/v1/messages", map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 500, "messages": msgs}, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	session := resp.Header.Get("X-Contextd-Session")
	reqs := s.fake.Requests()
	bill := reqs[len(reqs)-1].Bill.Input()
	used := s.used(session, len(msgs)+1)
	if off := math.Abs(float64(used - bill)); off > max(0.01*float64(bill), 12) {
		t.Errorf("used %d tokens after the call; the provider counted %d", used, bill)
	}
	s.checkUpstream()
}

// TestCountTokensAfterACompactionBlock: contextd's answer to
// count_tokens for a history with a compaction block counts, as the API
// reads it, nothing before the block: the same as the history from the
// block on. Without the fix it counted the whole history.
func TestCountTokensAfterACompactionBlock(t *testing.T) {
	s := start(t, nil)
	tail := []map[string]any{
		{"role": "assistant", "content": []map[string]any{{"type": "compaction", "content": "Summary: calc.py is fixed."}, {"type": "text", "text": "turn 1 done"}}},
		anText("user", "Turn 2: now mul()."),
	}
	count := func(msgs []map[string]any) int64 {
		t.Helper()
		resp, out := s.post("/v1/messages/count_tokens", map[string]any{"model": "claude-sonnet-4-5", "messages": msgs}, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, out)
		}
		var v struct {
			InputTokens int64 `json:"input_tokens"`
		}
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatal(err)
		}
		return v.InputTokens
	}
	full := append([]map[string]any{anText("user", "Turn 0: here is the output.\n"+bigResult(0))}, tail...)
	if got, want := count(full), count(tail); got != want {
		t.Errorf("count_tokens: %d with the messages before the block, %d without them", got, want)
	}
}

// TestCompactedResponsesInput: a Codex-like client compacts its
// conversation through POST /v1/responses/compact (passed through,
// nothing recorded) and sends the compacted input — the user message the
// compaction kept, the `compaction` item, the next prompt — as its next
// request. The item goes upstream byte for byte, in its place, and is
// counted by its length (3/16 of its encrypted_content) until the
// provider's report anchors the session. With a signal it is a client
// compaction recorded in the signal's session (history "compacted", tier
// client_compaction, the originals still in the log), and the next
// request, which extends the compacted input, extends that session.
// Before, it was a fork (a new session holding a copy). Without a signal
// it is a fork of the session whose log starts with the kept message
// (docs/gateway.md, Known limits).
func TestCompactedResponsesInput(t *testing.T) {
	for _, signalled := range []bool{true, false} {
		t.Run(map[bool]string{true: "signal", false: "none"}[signalled], func(t *testing.T) {
			s := start(t, nil)
			var sig map[string]string
			if signalled {
				sig = map[string]string{"X-Contextd-Session": "cx-compact"}
			}
			user := func(text string) map[string]any {
				return map[string]any{"role": "user", "content": text}
			}
			task := "Fix the failing test in calc.py."
			input := []any{user(task)}
			for i := range 4 {
				input = append(input, user("Here is the output.\n"+bigResult(i)))
			}
			resp, out := s.post("/v1/responses", map[string]any{"model": "gpt-4o", "input": input}, sig)
			if resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, out)
			}
			first := resp.Header.Get("X-Contextd-Session")
			resp, out = s.post("/v1/responses/compact", map[string]any{"model": "gpt-4o", "input": input}, sig)
			if resp.StatusCode != http.StatusAccepted || resp.Header.Get("X-Fake-Endpoint") != "POST /v1/responses/compact" {
				t.Fatalf("compact: %d %s", resp.StatusCode, out)
			}
			encrypted := strings.Repeat("gAAAAABpZ2VuY3J5cHRlZA", 200) // 4,400 bytes
			item := map[string]any{"type": "compaction", "id": "cmp_0a1", "encrypted_content": encrypted}
			compacted := []any{user(task), item, user("Now the tests for mul().")}
			body, _ := json.Marshal(map[string]any{"model": "gpt-4o", "input": compacted})
			resp, out = s.post("/v1/responses", body, sig)
			if resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, out)
			}
			history := resp.Header.Get("X-Contextd-History")
			t.Logf("history %q, session %q (first %q), %s%% used", history, resp.Header.Get("X-Contextd-Session"), first, resp.Header.Get("X-Contextd-Used-Percent"))
			reqs := s.fake.Requests()
			last := reqs[len(reqs)-1]
			var got, want struct {
				Input json.RawMessage `json:"input"`
			}
			_ = json.Unmarshal(last.Raw, &got)
			_ = json.Unmarshal(body, &want)
			if !reflect.DeepEqual(withoutMarks(got.Input), withoutMarks(want.Input)) {
				t.Fatalf("upstream input differs from the client's: %s", got.Input)
			}
			itemJSON, _ := json.Marshal(item)
			if !bytes.Contains(last.Raw, itemJSON) {
				t.Fatalf("the compaction item did not go upstream as sent")
			}
			if !signalled {
				// The compacted input shares the kept user message with the
				// session: a fork of it.
				if history != "forked" {
					t.Errorf("history %q, want forked", history)
				}
				s.checkUpstream()
				return
			}
			if history != "compacted" || resp.Header.Get("X-Contextd-Session") != first {
				t.Fatalf("history %q in session %q, want compacted in %q", history, resp.Header.Get("X-Contextd-Session"), first)
			}
			checkClientCompaction(t, s, first, bigResult(3))
			// The next request extends the compacted input: the same session.
			var reply struct {
				Output []json.RawMessage `json:"output"`
			}
			if err := json.Unmarshal(out, &reply); err != nil || len(reply.Output) == 0 {
				t.Fatalf("reply %s: %v", out, err)
			}
			for _, o := range reply.Output {
				compacted = append(compacted, o)
			}
			compacted = append(compacted, user("And for div()."))
			resp, out = s.post("/v1/responses", map[string]any{"model": "gpt-4o", "input": compacted}, sig)
			if resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, out)
			}
			if h, id := resp.Header.Get("X-Contextd-History"), resp.Header.Get("X-Contextd-Session"); h != "extended" || id != first {
				t.Errorf("the request after the compaction: history %q in %q, want extended in %q", h, id, first)
			}
			s.checkUpstream()
		})
	}
}

// TestProviderDroppedMessagesSurviveCompaction: after the provider's
// compaction, the conversation grows past contextd's own threshold (a
// window of 7,000 tokens) and contextd compacts what follows the block;
// the messages before it, which the provider no longer reads, are never
// summarized or pruned: they go upstream as the client sent them, every
// call. Without their pin, the summarize tier took them first (the
// oldest), although they counted nothing.
func TestProviderDroppedMessagesSurviveCompaction(t *testing.T) {
	models := t.TempDir() + "/models.json"
	if err := os.WriteFile(models, []byte(`{"models": [{"name": "small-claude", "provider": "anthropic", "context_window": 7000, "max_output_tokens": 500, "encoding": "cl100k_base"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := start(t, map[string]string{"CONTEXTD_MODELS_FILE": models})
	var msgs []map[string]any
	compacted := false
	for turn := range 9 {
		var content []map[string]any
		if turn == 2 {
			content = append(content, map[string]any{"type": "compaction", "content": "Summary: calc.py's add() is fixed."})
			s.fake.Script(gatewaytest.Reply{Text: fmt.Sprintf("turn %d done", turn), Compaction: "Summary: calc.py's add() is fixed."})
		} else {
			s.fake.Script(gatewaytest.Reply{Text: fmt.Sprintf("turn %d done", turn)})
		}
		msgs = append(msgs, anText("user", fmt.Sprintf("Turn %d: here is the output.\n%s", turn, bigResult(turn))))
		resp, out := s.post("/v1/messages", map[string]any{"model": "small-claude", "max_tokens": 500, "messages": msgs}, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("turn %d: %d %s", turn, resp.StatusCode, out)
		}
		compacted = compacted || resp.Header.Get("X-Contextd-Compacted") == "true"
		content = append(content, map[string]any{"type": "text", "text": fmt.Sprintf("turn %d done", turn)})
		msgs = append(msgs, map[string]any{"role": "assistant", "content": content})
		if turn < 3 {
			continue
		}
		reqs := s.fake.Requests()
		var got struct {
			Messages json.RawMessage `json:"messages"`
		}
		_ = json.Unmarshal(reqs[len(reqs)-1].Raw, &got)
		sent, _ := json.Marshal(msgs[:6])
		var head []json.RawMessage
		_ = json.Unmarshal(got.Messages, &head)
		if len(head) < 6 {
			for i, h := range head {
				t.Logf("%d: %.200s", i, h)
			}
			t.Fatalf("turn %d: %d messages upstream", turn, len(head))
		}
		gotHead, _ := json.Marshal(head[:6])
		if !reflect.DeepEqual(withoutMarks(gotHead), withoutMarks(sent)) {
			t.Fatalf("turn %d: the messages up to the compaction block did not go upstream as the client sent them: %.300s", turn, gotHead)
		}
	}
	if !compacted {
		t.Fatal("contextd never compacted: the test tests nothing")
	}
	s.checkUpstream()
}
