package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
	"github.com/contextd/contextd/internal/tokens"
)

// TestAsideOverTheWindow: a client without a signal asks for the summary
// of its history (an aside: the session's view and the request's own new
// messages) when its view is near the window and its new messages (Qwen
// Code's latest tool result and its directive) are large. The view was
// compacted to fit without them, and the aside went upstream with them,
// past the window (with Qwen Code at a 24k window and 8 KB tool outputs,
// the provider's 400 "prompt is too long: 24141 tokens > 24000"). An
// aside that does not fit goes as an extension, compacted with its new
// messages like any request. Without the check (summaryrequest.go,
// asideFits) the summary request here went up with about 6,000 tokens
// for a usable 5,100.
func TestAsideOverTheWindow(t *testing.T) {
	s := startSmall(t)
	msgs := sixTurns(t, s, "small", moduleReply)
	resp, reqs := askSummary(t, s, map[string]any{"model": "small"}, msgs, strings.Repeat("Here is the whole failing test output, line by line. ", 250))
	sent := upstreamTokens(t, reqs[len(reqs)-1].Raw)
	t.Logf("the summary request (history %q) went upstream with about %d tokens", resp.Header.Get("X-Contextd-History"), sent)
	if sent > 6000-900 {
		t.Errorf("the summary request went upstream with about %d tokens, past the usable window (6,000 less 900 for the output)", sent)
	}
	s.checkUpstream()
}

// upstreamTokens counts the texts of a Chat Completions request's
// messages with o200k_base (less than the provider counts: no framing).
func upstreamTokens(t *testing.T, raw []byte) int {
	t.Helper()
	enc, err := tokens.LoadEncoding("o200k_base")
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Messages []struct {
			Content any `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range body.Messages {
		b, _ := json.Marshal(m.Content)
		n += enc.Count(string(b))
	}
	return n
}

// TestAsideOverTheWindowByTheProvidersCount: as TestAsideOverTheWindow,
// with a model counted approximately, whose provider counts more than
// contextd's encoding does (here about 1.4 times: the fake's bytes / 4).
// The view's usage is the provider's count (anchored, calibrated), and
// asideFits compared the aside's own messages counted with the session's
// encoding against it: a tail that fit by that count went upstream past
// the window by the provider's (5,980 tokens for a usable 5,500).
func TestAsideOverTheWindowByTheProvidersCount(t *testing.T) {
	models := filepath.Join(t.TempDir(), "models.json")
	if err := os.WriteFile(models, []byte(`{"models": [{"name": "approx", "provider": "openai", "context_window": 6000, "max_output_tokens": 500, "encoding": "o200k_base", "exact": false}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := start(t, map[string]string{"CONTEXTD_MODELS_FILE": models})
	// o200k_base counts a run of spaces as one token: the fake (bytes / 4)
	// counts these texts about 1.4 times as contextd does.
	spaced := func(s string, n int) string { return strings.Repeat(s+";          internationalization. ", n) }
	reply := func(i int) string {
		return fmt.Sprintf("Step %d: ", i) + spaced(fmt.Sprintf("read module %d of the parser", i), 25)
	}
	msgs := sixTurns(t, s, "approx", reply)
	resp, reqs := askSummary(t, s, map[string]any{"model": "approx"}, msgs, spaced("Here is the failing test output", 220))
	last := reqs[len(reqs)-1]
	t.Logf("the summary request (history %q) went upstream with %d tokens by the provider's count, about %d by contextd's", resp.Header.Get("X-Contextd-History"), last.Bill.Input(), upstreamTokens(t, last.Raw))
	if n := last.Bill.Input(); n > 6000-500 {
		t.Errorf("the summary request went upstream with %d tokens by the provider's count, past the usable window (6,000 less 500 for the output)", n)
	}
	s.checkUpstream()
}

// sixTurns sends six turns of a conversation with model, each answered
// with reply(i), none compacted, and returns its messages.
func sixTurns(t *testing.T, s *server, model string, reply func(int) string) []any {
	t.Helper()
	msgs := []any{map[string]any{"role": "system", "content": "You are a coding agent."}}
	for i := range 6 {
		msgs = append(msgs, map[string]any{"role": "user", "content": fmt.Sprintf("Go on with step %d.", i)})
		s.fake.Script(gatewaytest.Reply{Text: reply(i)})
		resp, out := s.post("/v1/chat/completions", map[string]any{"model": model, "messages": msgs}, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("turn %d: %d %s", i, resp.StatusCode, out)
		}
		if resp.Header.Get("X-Contextd-Compacted") == "true" {
			t.Fatalf("turn %d compacted: the test's turns must stay below the window", i)
		}
		msgs = append(msgs, map[string]any{"role": "assistant", "content": reply(i)})
	}
	return msgs
}

// TestAsideOverTheWindowWithItsOwnTools: an aside goes upstream with the
// request's own system prompt and tools, not the session's (which stay
// as they are), and the view's free room is the session's: a summary
// request whose tools the session does not have (here about 2,400
// tokens of them, its own messages about 700) fit by its messages and
// went upstream past the window with its tools (about 6,130 tokens for a
// usable 5,500).
func TestAsideOverTheWindowWithItsOwnTools(t *testing.T) {
	s := startSmall(t)
	msgs := sixTurns(t, s, "small", moduleReply)
	var tools []any
	for i := range 14 {
		tools = append(tools, map[string]any{"type": "function", "function": map[string]any{
			"name":        fmt.Sprintf("tool_%d", i),
			"description": strings.Repeat(fmt.Sprintf("Tool %d reads a file of the repository and returns its lines. ", i), 10),
			"parameters":  map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}}}})
	}
	resp, reqs := askSummary(t, s, map[string]any{"model": "small", "tools": tools}, msgs, strings.Repeat("Here is the whole failing test output, line by line. ", 60))
	last := reqs[len(reqs)-1]
	var body struct {
		Tools json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(last.Raw, &body); err != nil {
		t.Fatal(err)
	}
	enc, err := tokens.LoadEncoding("o200k_base")
	if err != nil {
		t.Fatal(err)
	}
	sent := upstreamTokens(t, last.Raw) + enc.Count(string(body.Tools))
	t.Logf("the summary request (history %q) went upstream with about %d tokens, its tools %d", resp.Header.Get("X-Contextd-History"), sent, enc.Count(string(body.Tools)))
	if sent > 6000-500 {
		t.Errorf("the summary request went upstream with about %d tokens, past the usable window (6,000 less 500 for the output)", sent)
	}
	s.checkUpstream()
}

// TestAsideOverItsOwnModelsWindow: an aside goes upstream with the
// request's own model, and the view's free room is of the session's
// model's window: a summary request for a model of a smaller window (here
// 4,500 tokens to the session's 6,000) fit by the session's and went
// upstream past its own model's (about 4,217 tokens for a usable 4,000).
func TestAsideOverItsOwnModelsWindow(t *testing.T) {
	models := filepath.Join(t.TempDir(), "models.json")
	if err := os.WriteFile(models, []byte(`{"models": [{"name": "small", "provider": "openai", "context_window": 6000, "max_output_tokens": 500, "encoding": "o200k_base", "exact": true},
		{"name": "smaller", "provider": "openai", "context_window": 4500, "max_output_tokens": 500, "encoding": "o200k_base", "exact": true}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := start(t, map[string]string{"CONTEXTD_MODELS_FILE": models})
	msgs := sixTurns(t, s, "small", moduleReply)
	resp, reqs := askSummary(t, s, map[string]any{"model": "smaller"}, msgs, strings.Repeat("Here is the whole failing test output, line by line. ", 100))
	sent := upstreamTokens(t, reqs[len(reqs)-1].Raw)
	t.Logf("the summary request (history %q) went upstream with about %d tokens", resp.Header.Get("X-Contextd-History"), sent)
	if sent > 4500-500 {
		t.Errorf("the summary request went upstream with about %d tokens, past its model's usable window (4,500 less 500 for the output)", sent)
	}
	s.checkUpstream()
}

// askSummary sends body with msgs, tail and Qwen Code's directive as its
// messages (a summary request), and returns the answer and the requests
// the fake received.
func askSummary(t *testing.T, s *server, body map[string]any, msgs []any, tail string) (*http.Response, []gatewaytest.Request) {
	t.Helper()
	body["messages"] = append(slices.Clone(msgs),
		map[string]any{"role": "user", "content": tail},
		map[string]any{"role": "user", "content": qwenDirective})
	s.fake.Script(gatewaytest.Reply{Text: "<state_snapshot>Six modules were read; the parser's tests still fail.</state_snapshot>"})
	resp, out := s.post("/v1/chat/completions", body, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the summary request: %d %s", resp.StatusCode, out)
	}
	return resp, s.fake.Requests()
}

// moduleReply is the reply of a turn of sixTurns, about 480 tokens.
func moduleReply(i int) string {
	return fmt.Sprintf("Step %d: ", i) + strings.Repeat(fmt.Sprintf("read module %d of the parser and noted its functions; ", i), 40)
}
