package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestSessionCapIsNotARateLimit: at CONTEXTD_MAX_SESSIONS_PER_TENANT a new
// conversation is refused with contextd's error naming the setting, in a
// status SDKs do not retry (403), in each provider's shape. Before the
// fix it was 429 rate_limit_exceeded, which SDKs retry for ever.
func TestSessionCapIsNotARateLimit(t *testing.T) {
	s := start(t, map[string]string{"CONTEXTD_MAX_SESSIONS_PER_TENANT": "1"})
	ask := func(path, text string) (*http.Response, []byte) {
		if path == "/v1/messages" {
			return s.post(path, map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": []any{map[string]any{"role": "user", "content": text}}},
				map[string]string{"anthropic-version": "2023-06-01"})
		}
		return s.post(path, map[string]any{"model": "gpt-4o", "messages": []any{map[string]any{"role": "user", "content": text}}}, nil)
	}
	if resp, body := ask("/v1/chat/completions", "the first conversation"); resp.StatusCode != http.StatusOK {
		t.Fatalf("first: %d %s", resp.StatusCode, body)
	}
	for i, path := range []string{"/v1/chat/completions", "/v1/messages"} {
		resp, body := ask(path, fmt.Sprintf("conversation %d", i+2))
		var e struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &e); err != nil {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
		if resp.StatusCode != http.StatusForbidden || e.Error.Type == "rate_limit_exceeded" || e.Error.Type == "rate_limit_error" ||
			!strings.Contains(e.Error.Message, "CONTEXTD_MAX_SESSIONS_PER_TENANT") || !strings.HasPrefix(e.Error.Message, "contextd: ") {
			t.Errorf("%s at the session cap: %d %s", path, resp.StatusCode, body)
		}
		if resp.Header.Get("Retry-After") != "" {
			t.Errorf("%s: Retry-After %q on a refusal that does not pass", path, resp.Header.Get("Retry-After"))
		}
	}
}
