package gateway_test

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// TestPassthrough: /v1/ routes contextd has no door for go to the right
// provider unchanged — method, path, query, headers (contextd's own and
// hop-by-hop ones dropped, with those Connection names), body — and the
// answer comes back as the provider sent it, a stream too. Before the fix
// they were 404.
func TestPassthrough(t *testing.T) {
	anth := gatewaytest.New()
	t.Cleanup(anth.Close)
	s := start(t, map[string]string{"CONTEXTD_ANTHROPIC_BASE_URL": anth.AnthropicBase()})
	cases := []struct {
		name, method, path string
		header             map[string]string
		body               string
		anthropic          bool
	}{
		{"get a response", "GET", "/v1/responses/resp_67ccd2bed1ec?include[]=reasoning.encrypted_content", map[string]string{"Authorization": "Bearer sk-test"}, "", false},
		{"compact", "POST", "/v1/responses/compact", map[string]string{"Authorization": "Bearer sk-test", "Content-Type": "application/json"},
			`{"model":"gpt-5-codex","input":[{"role":"user","content":"hi"}]}`, false},
		{"embeddings", "POST", "/v1/embeddings", map[string]string{"Authorization": "Bearer sk-test", "Content-Type": "application/json", "OpenAI-Organization": "org-1"},
			`{"model":"text-embedding-3-small","input":"The food was delicious"}`, false},
		{"batches", "POST", "/v1/messages/batches", map[string]string{"X-Api-Key": "sk-ant", "Anthropic-Version": "2023-06-01", "Anthropic-Beta": "message-batches-2024-09-24", "Content-Type": "application/json"},
			`{"requests":[{"custom_id":"a","params":{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}}]}`, true},
		{"anthropic files", "GET", "/v1/files?limit=2", map[string]string{"X-Api-Key": "sk-ant", "Anthropic-Version": "2023-06-01"}, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fake, other := s.fake, anth
			if c.anthropic {
				fake, other = anth, s.fake
			}
			before, beforeOther := len(fake.Requests()), len(other.Requests())
			req, _ := http.NewRequest(c.method, s.url(c.path), strings.NewReader(c.body))
			if c.body == "" {
				req.Body = nil
			}
			for k, v := range c.header {
				req.Header.Set(k, v)
			}
			req.Header.Set("X-Contextd-Session", "not-for-the-provider")
			req.Header.Set("Connection", "keep-alive, X-Hop")
			req.Header.Set("X-Hop", "hop-by-hop")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted || resp.Header.Get("X-Fake-Endpoint") == "" {
				t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, got)
			}
			reqs := fake.Requests()
			if len(reqs) != before+1 || len(other.Requests()) != beforeOther {
				t.Fatalf("the request went to the wrong provider (%d → %d here, %d → %d there)", before, len(reqs), beforeOther, len(other.Requests()))
			}
			up := reqs[len(reqs)-1]
			path, query, _ := strings.Cut(c.path, "?")
			if up.Path != path || up.Query != query || string(up.Raw) != c.body {
				t.Errorf("upstream got %s ?%s %q, want %s ?%s %q", up.Path, up.Query, up.Raw, path, query, c.body)
			}
			for k, v := range c.header {
				if up.Header.Get(k) != v {
					t.Errorf("header %s: upstream got %q, want %q", k, up.Header.Get(k), v)
				}
			}
			for _, k := range []string{"X-Contextd-Session", "X-Hop"} {
				if v := up.Header.Get(k); v != "" {
					t.Errorf("header %s reached the provider: %q", k, v)
				}
			}
			var echo struct{ Method, Path string }
			if json.Unmarshal(got, &echo) != nil || echo.Method != c.method || echo.Path != path {
				t.Errorf("answer %s", got)
			}
		})
	}
	// A streamed answer comes back as it was sent.
	resp, err := http.Get(s.url("/v1/batches/stream-me?stream=true"))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := "data: {\"n\":0}\n\ndata: {\"n\":1}\n\ndata: {\"n\":2}\n\n"
	if resp.Header.Get("Content-Type") != "text/event-stream" || !bytes.Equal(got, []byte(want)) {
		t.Errorf("stream: %v %q, want %q", resp.Header, got, want)
	}
}

// TestPassthroughUpload: with API keys, a multipart upload (a file, an
// audio transcription) passes through byte for byte; without a contextd
// key it is refused like any call.
func TestPassthroughUpload(t *testing.T) {
	s := start(t, map[string]string{"CONTEXTD_API_KEYS": "acme:ctx-secret-1"})
	body := "--XyZ\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"b.jsonl\"\r\nContent-Type: application/octet-stream\r\n\r\n{\"custom_id\":\"a\"}\n\r\n--XyZ--\r\n"
	for _, key := range []string{"", "ctx-secret-1"} {
		req, _ := http.NewRequest("POST", s.url("/v1/files"), strings.NewReader(body))
		req.Header.Set("Content-Type", "multipart/form-data; boundary=XyZ")
		req.Header.Set("Authorization", "Bearer sk-test")
		if key != "" {
			req.Header.Set("X-Contextd-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if key == "" {
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("without a contextd key: %d %s", resp.StatusCode, got)
			}
			continue
		}
		reqs := s.fake.Requests()
		if resp.StatusCode != http.StatusAccepted || len(reqs) != 1 || string(reqs[0].Raw) != body || reqs[0].Header.Get("Content-Type") != "multipart/form-data; boundary=XyZ" {
			t.Errorf("upload: %d %s; upstream got %d requests", resp.StatusCode, got, len(reqs))
		}
	}
}

// TestPassthroughBounds: what a tenant can reach through the pass-through
// is bounded. A path with dot segments (escaped, so no client or mux
// cleaned them) would leave the configured base URL at an upstream or a
// proxy that resolves them (or reach a door's path unrecorded): 400,
// nothing sent. TRACE echoes the request's headers: 405. With contextd's
// API keys (several tenants under one provider account) the server's
// provider key is not lent on pass-through, or one tenant could list,
// read and delete another's files, batches and stored responses; without
// keys it still is. Before the fix all went upstream with the server's key.
func TestPassthroughBounds(t *testing.T) {
	var mu sync.Mutex
	var got []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.RequestURI+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(up.Close)
	upstream := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := got
		got = nil
		return out
	}
	env := map[string]string{"CONTEXTD_OPENAI_BASE_URL": up.URL + "/proxy/v1",
		"CONTEXTD_GATEWAY_SERVER_KEYS": "true", "CONTEXTD_OPENAI_API_KEY": "sk-server"}
	do := func(s *server, method, path, key string) int {
		t.Helper()
		req, err := http.NewRequest(method, s.url(path), nil)
		if err != nil {
			t.Fatal(err)
		}
		if key != "" {
			req.Header.Set("X-Contextd-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	multi := maps.Clone(env)
	multi["CONTEXTD_API_KEYS"] = "acme:ctx-secret-1,globex:ctx-secret-2"
	s := start(t, multi)
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/v1/%2e%2e/%2e%2e/admin", http.StatusBadRequest},
		{"GET", "/v1/x/%2E%2E/chat/completions", http.StatusBadRequest},
		{"GET", "/v1/a%2F..%2F..%2Fb", http.StatusBadRequest},
		{"GET", "/v1/files/.%5c..%5cb", http.StatusBadRequest},
		{"TRACE", "/v1/files", http.StatusMethodNotAllowed},
	} {
		if code := do(s, c.method, c.path, "ctx-secret-2"); code != c.want {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, code, c.want)
		}
		if u := upstream(); len(u) > 0 {
			t.Errorf("%s %s reached the upstream: %q", c.method, c.path, u)
		}
	}
	if code := do(s, "GET", "/v1/files?purpose=batch", "ctx-secret-2"); code != http.StatusOK {
		t.Errorf("GET /v1/files: %d", code)
	}
	if u := upstream(); len(u) != 1 || u[0] != "GET /proxy/v1/files?purpose=batch " {
		t.Errorf("with API keys, upstream got %q, want the request without the server's key", u)
	}
	// One tenant (no API keys): the operator's key is lent as configured.
	one := start(t, env)
	if code := do(one, "GET", "/v1/files", ""); code != http.StatusOK {
		t.Errorf("GET /v1/files without keys: %d", code)
	}
	if u := upstream(); len(u) != 1 || u[0] != "GET /proxy/v1/files Bearer sk-server" {
		t.Errorf("without API keys, upstream got %q, want the server's key", u)
	}
}

// TestPassthroughRedirectNotFollowed: a redirect from the provider goes
// back to the client as sent; the gateway does not follow it, so the
// client's x-api-key (which net/http strips from no redirect, unlike
// Authorization) never reaches the host a Location names. Before the fix
// the gateway followed it and that host got the key.
func TestPassthroughRedirectNotFollowed(t *testing.T) {
	var elsewhere sync.Mutex
	var keys []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Lock()
		keys = append(keys, r.Header.Get("X-Api-Key"))
		elsewhere.Unlock()
	}))
	t.Cleanup(other.Close)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/download", http.StatusFound)
	}))
	t.Cleanup(up.Close)
	s := start(t, map[string]string{"CONTEXTD_ANTHROPIC_BASE_URL": up.URL})
	req, _ := http.NewRequest("GET", s.url("/v1/files/file_1/content"), nil)
	req.Header.Set("X-Api-Key", "sk-ant-secret")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != other.URL+"/download" {
		t.Errorf("%d Location %q, want the provider's 302", resp.StatusCode, resp.Header.Get("Location"))
	}
	elsewhere.Lock()
	defer elsewhere.Unlock()
	if len(keys) > 0 {
		t.Errorf("the gateway followed the redirect: the other host got x-api-key %q", keys)
	}
}

// TestPassthroughBodyTooLarge: a passed-through body over
// CONTEXTD_MAX_MESSAGE_BYTES is refused with 413 naming the setting, as
// at the doors, not a 502 "the provider could not be reached". Before the
// fix it was 502.
func TestPassthroughBodyTooLarge(t *testing.T) {
	s := start(t, map[string]string{"CONTEXTD_MAX_MESSAGE_BYTES": "1024"})
	body := `{"model":"text-embedding-3-small","input":"` + strings.Repeat("x", 4096) + `"}`
	req, _ := http.NewRequest("POST", s.url("/v1/embeddings"), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(got), "CONTEXTD_MAX_MESSAGE_BYTES") {
		t.Errorf("%d %s, want 413 naming CONTEXTD_MAX_MESSAGE_BYTES", resp.StatusCode, got)
	}
}
