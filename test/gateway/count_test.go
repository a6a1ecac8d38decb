package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// TestCountTokensFollowsForks: count_tokens counts what the request would
// send in the session the resolver lands it in — here a fork (an edited
// message), whose view was cleared — and creates nothing. Before the fix
// it looked at the conversation's first session only, missed the fork,
// and counted the client's whole history (thousands of tokens instead of
// the few the fork's view holds).
func TestCountTokensFollowsForks(t *testing.T) {
	s := start(t, nil)
	hdr := map[string]string{"anthropic-version": "2023-06-01"}
	long := strings.Repeat("The parser reads the whole file before it checks the header. ", 200)
	user := func(text string) map[string]any { return map[string]any{"role": "user", "content": text} }
	assistant := func(text string) map[string]any { return map[string]any{"role": "assistant", "content": text} }
	send := func(msgs ...map[string]any) (string, string) {
		t.Helper()
		resp, body := s.post("/v1/messages", map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": msgs}, hdr)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		return resp.Header.Get("X-Contextd-Session"), resp.Header.Get("X-Contextd-History")
	}
	s.fake.Script(gatewaytest.Reply{Text: "r1"}, gatewaytest.Reply{Text: "r2"}, gatewaytest.Reply{Text: "r3"})
	root, _ := send(user(long))
	send(user(long), assistant("r1"), user("Fix it."))
	fork, history := send(user(long), assistant("r1"), user("Fix it, and add a test."))
	if fork == root || !strings.HasPrefix(history, "edited") {
		t.Fatalf("the edit landed in %q (%s), the root is %q", fork, history, root)
	}
	s.waitLog(fork, []string{"user: " + long, "assistant: r1", "user: Fix it, and add a test.", "assistant: r3"})
	s.rpc("ClearMessages", map[string]any{"sessionId": fork}, &map[string]any{})
	var before struct {
		Sessions []any `json:"sessions"`
	}
	s.rpc("ListSessions", map[string]any{}, &before)
	next := map[string]any{"model": "claude-sonnet-4-5", "messages": []any{user(long), assistant("r1"), user("Fix it, and add a test."), assistant("r3"), user("Thanks.")}}
	resp, body := s.post("/v1/messages/count_tokens", next, hdr)
	var count struct {
		InputTokens int64 `json:"input_tokens"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &count) != nil {
		t.Fatalf("count_tokens: %d %s", resp.StatusCode, body)
	}
	if count.InputTokens > 100 {
		t.Errorf("count_tokens: %d tokens; the fork's cleared view and the new message are a few", count.InputTokens)
	}
	var after struct {
		Sessions []any `json:"sessions"`
	}
	s.rpc("ListSessions", map[string]any{}, &after)
	if len(after.Sessions) != len(before.Sessions) {
		t.Errorf("count_tokens made a session: %d sessions, then %d", len(before.Sessions), len(after.Sessions))
	}
}
