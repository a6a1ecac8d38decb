package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
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
	reply := func(i int) string {
		return fmt.Sprintf("Step %d: ", i) + strings.Repeat(fmt.Sprintf("read module %d of the parser and noted its functions; ", i), 40)
	}
	msgs := []any{map[string]any{"role": "system", "content": "You are a coding agent."}}
	for i := range 6 {
		msgs = append(msgs, map[string]any{"role": "user", "content": fmt.Sprintf("Go on with step %d.", i)})
		s.fake.Script(gatewaytest.Reply{Text: reply(i)})
		resp, out := s.post("/v1/chat/completions", map[string]any{"model": "small", "messages": msgs}, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("turn %d: %d %s", i, resp.StatusCode, out)
		}
		if resp.Header.Get("X-Contextd-Compacted") == "true" {
			t.Fatalf("turn %d compacted: the test's turns must stay below the window", i)
		}
		msgs = append(msgs, map[string]any{"role": "assistant", "content": reply(i)})
	}
	ask := append(slices.Clone(msgs),
		map[string]any{"role": "user", "content": strings.Repeat("Here is the whole failing test output, line by line. ", 250)},
		map[string]any{"role": "user", "content": qwenDirective})
	s.fake.Script(gatewaytest.Reply{Text: "<state_snapshot>Six modules were read; the parser's tests still fail.</state_snapshot>"})
	resp, out := s.post("/v1/chat/completions", map[string]any{"model": "small", "messages": ask}, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the summary request: %d %s", resp.StatusCode, out)
	}
	reqs := s.fake.Requests()
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
