package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
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

// TestIdleSessionsClosed: gateway sessions idle longer than
// CONTEXTD_GATEWAY_SESSION_TTL are closed by the retention run, so
// stateless traffic never fills the tenant: at a cap of three sessions
// (one made through the API) a third conversation gets in once the first
// two are idle, and a session
// made through the API (no gateway label) stays. Before the fix the third
// conversation was refused for good.
func TestIdleSessionsClosed(t *testing.T) {
	s := start(t, map[string]string{"CONTEXTD_MAX_SESSIONS_PER_TENANT": "3", "CONTEXTD_GATEWAY_SESSION_TTL": "1s", "CONTEXTD_RETENTION_INTERVAL": "200ms"})
	var created struct {
		Session struct {
			ID string `json:"id"`
		} `json:"session"`
	}
	s.rpc("CreateSession", map[string]any{"model": "gpt-4o"}, &created)
	ask := func(text string) (*http.Response, []byte) {
		return s.post("/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": []any{map[string]any{"role": "user", "content": text}}}, nil)
	}
	for i := range 2 {
		resp, body := ask(fmt.Sprintf("conversation %d", i))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("conversation %d: %d %s", i, resp.StatusCode, body)
		}
	}
	if resp, body := ask("conversation 2, at once"); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("at the cap: %d %s", resp.StatusCode, body)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, body := ask("conversation 2")
		if resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the idle sessions were never closed: %d %s", resp.StatusCode, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var got struct {
		Session struct {
			ID string `json:"id"`
		} `json:"session"`
	}
	s.rpc("GetSession", map[string]any{"sessionId": created.Session.ID}, &got)
	if got.Session.ID != created.Session.ID {
		t.Errorf("the API's session was closed")
	}
}

// TestIdleCloseDuringRequest: a session that turns idle
// (CONTEXTD_GATEWAY_SESSION_TTL) while a request is between matching it
// and preparing it is closed under that request; the request matches again
// and goes on in a new session, never answering 404 for a conversation
// the client merely resumed. The race is provoked by coming back just
// around the TTL while the retention run goes every few milliseconds.
// Before the fix some requests answered 404 ("session not found").
func TestIdleCloseDuringRequest(t *testing.T) {
	s := start(t, map[string]string{"CONTEXTD_GATEWAY_SESSION_TTL": "40ms", "CONTEXTD_RETENTION_INTERVAL": "2ms"})
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := map[string]int{}
	for k := range 6 {
		wg.Go(func() {
			body := map[string]any{"model": "gpt-4o", "messages": []any{map[string]any{"role": "user", "content": fmt.Sprintf("conversation %d", k)}}}
			for i := range 40 {
				resp, out := s.post("/v1/chat/completions", body, nil)
				if resp.StatusCode != http.StatusOK {
					mu.Lock()
					failed[fmt.Sprintf("%d %s", resp.StatusCode, out)]++
					mu.Unlock()
				}
				time.Sleep(36*time.Millisecond + time.Duration(i%8)*time.Millisecond)
			}
		})
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Errorf("requests of resumed conversations failed: %v", failed)
	}
}
