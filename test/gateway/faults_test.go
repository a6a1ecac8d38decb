package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// errorShape checks a refusal is in the provider's error shape.
func errorShape(t *testing.T, path string, body []byte, want string) {
	t.Helper()
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Message == "" {
		t.Fatalf("not a provider error body: %s", body)
	}
	if strings.HasPrefix(path, "/v1/messages") && e.Type != "error" {
		t.Errorf("Anthropic errors have type error: %s", body)
	}
	if !strings.Contains(e.Error.Message, want) {
		t.Errorf("error %q does not say %q", e.Error.Message, want)
	}
}

// TestBadInput: each bad request is a clear error in the provider's shape,
// and nothing is stored.
func TestBadInput(t *testing.T) {
	s := start(t, map[string]string{"CONTEXTD_MAX_MESSAGE_BYTES": "4194304"})
	big := strings.Repeat("x", 5<<20)
	cases := []struct {
		name, path string
		body       any
		status     int
		want       string
	}{
		{"malformed JSON chat", "/v1/chat/completions", []byte(`{"model": "gpt-4o", "messages": [`), 400, "not a JSON object"},
		{"malformed JSON messages", "/v1/messages", []byte(`[1,2`), 400, "not a JSON object"},
		{"no model", "/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}, 400, "model"},
		{"no messages", "/v1/chat/completions", map[string]any{"model": "gpt-4o"}, 400, "messages"},
		{"empty messages", "/v1/messages", map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": []any{}}, 400, "messages"},
		{"no input", "/v1/responses", map[string]any{"model": "gpt-4o"}, 400, "input"},
		{"bad role", "/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": []any{map[string]any{"role": "wizard", "content": "hi"}}}, 400, "messages[0].role"},
		{"tool result without its call", "/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": []any{
			map[string]any{"role": "user", "content": "hi"},
			map[string]any{"role": "tool", "tool_call_id": "call_nobody", "content": "out"}}}, 400, "call_nobody"},
		{"tool_result without its tool_use", "/v1/messages", map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": []any{
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_nobody", "content": "out"}}}}}, 400, "toolu_nobody"},
		{"body over the limit", "/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": []any{map[string]any{"role": "user", "content": big}}}, 413, "CONTEXTD_MAX_MESSAGE_BYTES"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := s.post(c.path, c.body, nil)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, body)
			}
			errorShape(t, c.path, body, c.want)
		})
	}
	if n := len(s.fake.Requests()); n != 0 {
		t.Errorf("%d requests reached the provider", n)
	}
	var list struct {
		Sessions []struct {
			ID           string `json:"id"`
			MessageCount string `json:"messageCount"`
		} `json:"sessions"`
	}
	s.rpc("ListSessions", map[string]any{}, &list)
	for _, ses := range list.Sessions {
		if log := s.logOf(ses.ID); len(log) > 0 {
			t.Errorf("a refused request stored messages in %s: %q", ses.ID, log)
		}
	}
}

// TestUnknownModel is served with the registry's default and says so.
func TestUnknownModel(t *testing.T) {
	s := start(t, nil)
	resp, body := s.post("/v1/chat/completions", map[string]any{"model": "my-finetune-7b", "messages": []any{map[string]any{"role": "user", "content": "hi"}}}, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if w := strings.Join(resp.Header.Values("X-Contextd-Warning"), " "); !strings.Contains(w, "my-finetune-7b") {
		t.Errorf("no warning about the unknown model: %q", w)
	}
}

// TestUpstreamFailuresKeepOneTurn: an upstream that fails (500), hangs or
// drops the stream passes the failure on; the client's retry stores its
// user turn once and the reply once, in one session.
func TestUpstreamFailuresKeepOneTurn(t *testing.T) {
	s := start(t, nil)
	history := []any{map[string]any{"role": "user", "content": "first question"}}
	send := func(stream bool, timeout time.Duration) (*http.Response, []byte, error) {
		b, _ := json.Marshal(map[string]any{"model": "gpt-4o", "messages": history, "stream": stream})
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url("/v1/chat/completions"), bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer sk-test")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		_, err = buf.ReadFrom(resp.Body)
		return resp, buf.Bytes(), err
	}
	// 1. The provider fails: its status and body come back unchanged.
	s.fake.Set(func(f *gatewaytest.Fake) { f.Status = http.StatusInternalServerError })
	resp, body, err := send(false, 10*time.Second)
	if err != nil || resp.StatusCode != 500 || !strings.Contains(string(body), "fake upstream failure 500") {
		t.Fatalf("500 not passed on: %v %v %s", err, resp, body)
	}
	// 2. The provider hangs: the client gives up.
	s.fake.Set(func(f *gatewaytest.Fake) { f.Status, f.Hang = 0, true })
	if _, _, err := send(false, 500*time.Millisecond); err == nil {
		t.Fatal("a hanging provider answered")
	}
	// 3. The stream drops after two events.
	s.fake.Set(func(f *gatewaytest.Fake) { f.Hang, f.DropAfter = false, 2 })
	resp, body, _ = send(true, 10*time.Second)
	if resp == nil || bytes.Contains(body, []byte("[DONE]")) {
		t.Fatalf("a dropped stream was completed: %s", body)
	}
	// 4. The retry goes through.
	s.fake.Set(func(f *gatewaytest.Fake) { f.DropAfter = 0 })
	s.fake.Script(gatewaytest.Reply{Text: "the answer"})
	resp, body, err = send(false, 10*time.Second)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("retry: %v %s", err, body)
	}
	// The sessions of the failed and the abandoned call were deleted with
	// their failure (failedmade.go); the dropped stream's is kept (its
	// usage, estimated, is in its ledger: cutusage.go), and the retry is
	// answered in it.
	ids := liveSessions(s)
	if len(ids) != 1 {
		t.Fatalf("sessions %q; want one, the dropped stream's", ids)
	}
	id := ids[0]
	if got := resp.Header.Get("X-Contextd-History"); got != "unchanged" {
		t.Errorf("retry: history %q, want unchanged (in session %s)", got, id)
	}
	want := []string{"user: first question", "assistant: the answer"}
	if got := s.waitLog(id, want); !slices.Equal(got, want) {
		t.Errorf("log after failures and a retry:\n got %q\nwant %q", got, want)
	}
	// 5. The provider cannot be reached: a provider-shaped 502.
	s.fake.Close()
	history = append(history, map[string]any{"role": "assistant", "content": "the answer"}, map[string]any{"role": "user", "content": "next"})
	resp, body, _ = send(false, 10*time.Second)
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("unreachable provider: %d %s", resp.StatusCode, body)
	}
	errorShape(t, "/v1/chat/completions", body, "could not be reached")
}

// TestEditedHistoryForks: a client whose history no longer extends its
// session (an edit, a rewind) goes on in a session of its own, and the
// first session is left as it was; the same edit resent lands in the same
// new session.
func TestEditedHistoryForks(t *testing.T) {
	s := start(t, nil)
	base := []any{map[string]any{"role": "system", "content": "sys"}, map[string]any{"role": "user", "content": "task"}}
	ask := func(msgs []any) (string, string) {
		t.Helper()
		resp, body := s.post("/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": msgs}, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		return resp.Header.Get("X-Contextd-Session"), resp.Header.Get("X-Contextd-History")
	}
	s.fake.Script(gatewaytest.Reply{Text: "a1"}, gatewaytest.Reply{Text: "a2"})
	first, _ := ask(base)
	withA1 := append(slices.Clone(base), map[string]any{"role": "assistant", "content": "a1"}, map[string]any{"role": "user", "content": "q2"})
	if id, h := ask(withA1); id != "" || h != "extended" {
		t.Fatalf("second call: %s %s", id, h)
	}
	before := []string{"user: task", "assistant: a1", "user: q2", "assistant: a2"}
	if got := s.waitLog(first, before); !slices.Equal(got, before) {
		t.Fatalf("log %q", got)
	}
	edited := append(slices.Clone(base), map[string]any{"role": "assistant", "content": "a1"}, map[string]any{"role": "user", "content": "q2, edited"})
	// The fork is the caller's own (made by this request): named; the
	// session it left is not (the caller did not name it, and a stranger
	// with the same history could have made it).
	forked, h := ask(edited)
	if forked == first || forked == "" || h != "edited" {
		t.Fatalf("edit: session %s history %q", forked, h)
	}
	// The edit resent without the reply the fork recorded is the same
	// request again: answered from the fork, nothing stored.
	if again, h := ask(edited); again != "" || h != "repeated" {
		t.Fatalf("the edit resent landed in %s (%s), want an unnamed session (repeated)", again, h)
	}
	if got := s.logOf(first); !slices.Equal(got, before) {
		t.Errorf("the first session changed:\n got %q\nwant %q", got, before)
	}
	// A rewind to the first question goes on in a session of its own; the
	// turn after it (carrying that call's answer) lands there too.
	s.fake.Script(gatewaytest.Reply{Text: "a1, again"})
	rewound, h := ask(base)
	if rewound == first || rewound == forked || rewound == "" || h != "rewound" {
		t.Fatalf("rewind: session %s history %q", rewound, h)
	}
	after := append(slices.Clone(base), map[string]any{"role": "assistant", "content": "a1, again"}, map[string]any{"role": "user", "content": "q2'"})
	if id, h := ask(after); id != "" || h != "extended" {
		t.Fatalf("the turn after the rewind landed in %s (%s), want extended", id, h)
	}
	want := []string{"user: task", "assistant: a1, again", "user: q2'", "assistant: a1, again"}
	if got := s.waitLog(rewound, want); len(got) < 3 || !slices.Equal(got[:3], want[:3]) {
		t.Errorf("the rewind's session: %q", got)
	}
	s.checkUpstream()
}

// TestStreamIsRelayed: the client has the first event while the provider
// is still streaming (the gateway does not buffer the body), and the
// provider's events reach it unchanged.
func TestStreamIsRelayed(t *testing.T) {
	s := start(t, nil)
	s.fake.Set(func(f *gatewaytest.Fake) { f.Pause = 150 * time.Millisecond })
	s.fake.Script(gatewaytest.Reply{Text: "one two three four five six"})
	b, _ := json.Marshal(map[string]any{"model": "gpt-4o", "stream": true, "messages": []any{map[string]any{"role": "user", "content": "count"}}})
	resp, err := http.Post(s.url("/v1/chat/completions"), "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("content type %q", ct)
	}
	r := bufio.NewReader(resp.Body)
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first line %q: %v", line, err)
	}
	firstAt := time.Now()
	rest, _ := r.ReadString(0)
	s.fake.Close() // waits for the handler: LastEventAt is final
	if !firstAt.Before(s.fake.LastEventAt) {
		t.Errorf("the first event reached the client at %v, after the provider's last at %v: the stream was buffered", firstAt, s.fake.LastEventAt)
	}
	if strings.Contains(rest, `"choices":[]`) {
		t.Errorf("the usage chunk the client did not ask for was passed on")
	}
	if !strings.HasSuffix(strings.TrimSpace(rest), "data: [DONE]") {
		t.Errorf("stream did not end with [DONE]: %q", rest)
	}
}

// TestAuthFailsClosed: with keys configured, the gateway needs contextd's
// key in X-Contextd-Key; the provider's key is forwarded and contextd's is
// not.
func TestAuthFailsClosed(t *testing.T) {
	s := start(t, map[string]string{"CONTEXTD_API_KEYS": "acme:ctx-secret-1"})
	msgs := map[string]any{"model": "gpt-4o", "messages": []any{map[string]any{"role": "user", "content": "hi"}}}
	for _, key := range []string{"", "wrong"} {
		resp, body := s.post("/v1/chat/completions", msgs, map[string]string{"X-Contextd-Key": key})
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("key %q: %d %s", key, resp.StatusCode, body)
		}
		errorShape(t, "/v1/chat/completions", body, "contextd")
	}
	resp, body := s.post("/v1/messages", map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 5, "messages": []any{map[string]any{"role": "user", "content": "hi"}}}, nil)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("anthropic without key: %d %s", resp.StatusCode, body)
	}
	errorShape(t, "/v1/messages", body, "contextd")
	if n := len(s.fake.Requests()); n != 0 {
		t.Fatalf("%d refused requests reached the provider", n)
	}
	resp, body = s.post("/v1/chat/completions", msgs, map[string]string{"X-Contextd-Key": "ctx-secret-1"})
	if resp.StatusCode != 200 {
		t.Fatalf("with key: %d %s", resp.StatusCode, body)
	}
	got := s.fake.Requests()[0].Header
	if got.Get("Authorization") != "Bearer sk-test" || got.Get("X-Contextd-Key") != "" {
		t.Errorf("forwarded headers: Authorization %q, X-Contextd-Key %q", got.Get("Authorization"), got.Get("X-Contextd-Key"))
	}
}

// TestCountTokensAndModels: Anthropic's count endpoint answers contextd's
// count; /v1/models lists the registry in either shape.
func TestCountTokensAndModels(t *testing.T) {
	s := start(t, nil)
	req := map[string]any{"model": "claude-sonnet-4-5", "system": "You are terse.", "messages": []any{map[string]any{"role": "user", "content": "How many tokens is this?"}}}
	resp, body := s.post("/v1/messages/count_tokens", req, nil)
	var count struct {
		InputTokens int64 `json:"input_tokens"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &count) != nil || count.InputTokens < 10 || count.InputTokens > 40 {
		t.Fatalf("count_tokens: %d %s", resp.StatusCode, body)
	}
	if n := len(s.fake.Requests()); n != 0 {
		t.Errorf("count_tokens reached the provider")
	}
	for _, anthropicClient := range []bool{false, true} {
		r, _ := http.NewRequest(http.MethodGet, s.url("/v1/models"), nil)
		if anthropicClient {
			r.Header.Set("anthropic-version", "2023-06-01")
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		var list struct {
			Object string `json:"object"`
			Data   []struct {
				ID   string `json:"id"`
				Type string `json:"type"`
			} `json:"data"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if len(list.Data) < 10 || anthropicClient && list.Data[0].Type != "model" || !anthropicClient && list.Object != "list" {
			t.Errorf("models (anthropic %v): %+v", anthropicClient, list)
		}
	}
}

// TestProviderHeadersForwarded: the client's provider headers and query
// (Claude Code sends /v1/messages?beta=true with anthropic-beta) reach the
// provider unchanged; without credentials the server's key is used.
func TestProviderHeadersForwarded(t *testing.T) {
	s := start(t, map[string]string{"CONTEXTD_OPENAI_API_KEY": "sk-server", "CONTEXTD_GATEWAY_SERVER_KEYS": "true"})
	resp, body := s.post("/v1/messages?beta=true", map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 5,
		"messages": []any{map[string]any{"role": "user", "content": "hi"}}}, map[string]string{"anthropic-beta": "interleaved-thinking-2025-05-14"})
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	got := s.fake.Requests()[0]
	if got.Query != "beta=true" || got.Header.Get("anthropic-beta") != "interleaved-thinking-2025-05-14" || got.Header.Get("x-api-key") != "sk-ant-test" || got.Header.Get("anthropic-version") != "2023-06-01" {
		t.Errorf("forwarded: query %q, headers %v", got.Query, got.Header)
	}
	b, _ := json.Marshal(map[string]any{"model": "gpt-4o", "messages": []any{map[string]any{"role": "user", "content": "hi"}}})
	r, err := http.Post(s.url("/v1/chat/completions"), "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if got := s.fake.Requests()[1].Header.Get("Authorization"); got != "Bearer sk-server" {
		t.Errorf("without client credentials the server's key is sent: got %q", got)
	}
	// Without CONTEXTD_GATEWAY_SERVER_KEYS the summarizers' key is not lent.
	s = start(t, map[string]string{"CONTEXTD_OPENAI_API_KEY": "sk-server"})
	r, err = http.Post(s.url("/v1/chat/completions"), "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if got := s.fake.Requests()[0].Header.Get("Authorization"); got != "" {
		t.Errorf("the server's key was lent by default: %q", got)
	}
}

// TestForkLeavesTheOldSessionAlone: a request that goes on in a session of
// its own does not change the session it left (model, tools), and a rewind
// and the turns after it land in one session.
func TestForkLeavesTheOldSessionAlone(t *testing.T) {
	s := start(t, nil)
	tools := func(name string) []any {
		return []any{map[string]any{"type": "function", "function": map[string]any{"name": name, "parameters": map[string]any{"type": "object"}}}}
	}
	h := map[string]string{"X-Contextd-Session": "mysess"}
	base := []any{map[string]any{"role": "user", "content": "task"}}
	s.post("/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": base, "tools": tools("good")}, h)
	edited := []any{map[string]any{"role": "user", "content": "task, edited"}}
	resp, _ := s.post("/v1/chat/completions", map[string]any{"model": "gpt-4o-mini", "messages": edited, "tools": tools("evil")}, h)
	fork := resp.Header.Get("X-Contextd-Session")
	if fork == "mysess" || !strings.HasPrefix(resp.Header.Get("X-Contextd-History"), "edited") {
		t.Fatalf("edit landed in %s (%s)", fork, resp.Header.Get("X-Contextd-History"))
	}
	var got struct {
		Session struct {
			Model string `json:"model"`
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		} `json:"session"`
	}
	s.rpc("GetSession", map[string]any{"sessionId": "mysess"}, &got)
	if got.Session.Model != "gpt-4o" || len(got.Session.Tools) != 1 || got.Session.Tools[0].Name != "good" {
		t.Errorf("the session left behind changed: %+v", got.Session)
	}
	// The fork's next turn lands in the fork.
	next := append(slices.Clone(edited), map[string]any{"role": "assistant", "content": "ok"}, map[string]any{"role": "user", "content": "more"})
	resp, _ = s.post("/v1/chat/completions", map[string]any{"model": "gpt-4o-mini", "messages": next, "tools": tools("evil")}, h)
	if id := resp.Header.Get("X-Contextd-Session"); id != fork || resp.Header.Get("X-Contextd-History") != "extended" {
		t.Errorf("the fork's next turn landed in %s (%s), want %s", id, resp.Header.Get("X-Contextd-History"), fork)
	}
}

// TestTooLargeIsContextLengthError: a request that cannot fit even after
// every tier is the provider's context-length error, and leaves no session.
func TestTooLargeIsContextLengthError(t *testing.T) {
	models := filepath.Join(t.TempDir(), "models.json")
	if err := os.WriteFile(models, []byte(`{"models": [{"name": "tiny", "provider": "openai", "context_window": 2000, "max_output_tokens": 200, "encoding": "o200k_base", "exact": true}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := start(t, map[string]string{"CONTEXTD_MODELS_FILE": models})
	resp, body := s.post("/v1/chat/completions", map[string]any{"model": "tiny", "messages": []any{map[string]any{"role": "user", "content": strings.Repeat("word ", 5000)}}}, nil)
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(body, &e) != nil || e.Error.Code != "context_length_exceeded" {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if n := len(s.fake.Requests()); n != 0 {
		t.Errorf("the request reached the provider")
	}
	var list struct {
		Sessions []any `json:"sessions"`
	}
	s.rpc("ListSessions", map[string]any{}, &list)
	if len(list.Sessions) != 0 {
		t.Errorf("a refused request left %d sessions", len(list.Sessions))
	}
}

// TestRepeatedRequest: the same request again after it was answered (a
// retry whose answer was lost, a second sample) is answered from the
// session without the reply it does not carry; nothing is stored, the
// call is in the ledger.
func TestRepeatedRequest(t *testing.T) {
	s := start(t, nil)
	s.fake.Script(gatewaytest.Reply{Text: "first answer"}, gatewaytest.Reply{Text: "second answer"})
	req := map[string]any{"model": "gpt-4o", "messages": []any{map[string]any{"role": "system", "content": "sys"}, map[string]any{"role": "user", "content": "quota"}}}
	resp, _ := s.post("/v1/chat/completions", req, nil)
	id := resp.Header.Get("X-Contextd-Session")
	want := []string{"user: quota", "assistant: first answer"}
	if got := s.waitLog(id, want); !slices.Equal(got, want) {
		t.Fatalf("log %q", got)
	}
	for range 20 { // never a fork, however often
		resp, body := s.post("/v1/chat/completions", req, nil)
		if resp.StatusCode != 200 || resp.Header.Get("X-Contextd-Session") != "" || resp.Header.Get("X-Contextd-History") != "repeated" {
			t.Fatalf("repeat: %d %s %s %s", resp.StatusCode, resp.Header.Get("X-Contextd-Session"), resp.Header.Get("X-Contextd-History"), body)
		}
	}
	reqs := s.fake.Requests()
	if strings.Contains(string(reqs[1].Raw), "first answer") {
		t.Errorf("the repeat carried the reply it did not send: %s", reqs[1].Raw)
	}
	if got := s.logOf(id); !slices.Equal(got, want) {
		t.Errorf("repeats changed the log: %q", got)
	}
	s.checkLedger(id)
	s.checkUpstream()
}

// TestProviderShapesKeptExactly: what the providers send and require back
// survives the round trip — an empty reasoning summary (Responses refuses
// a reasoning item without one), and an Anthropic stream whose blocks
// interleave (the assembly must not lose or mix them).
func TestProviderShapesKeptExactly(t *testing.T) {
	s := start(t, nil)
	s.fake.Script(gatewaytest.Reply{EmptyReasoning: true, ToolCalls: []gatewaytest.ToolCall{lsCall}}, gatewaytest.Reply{Text: "done"})
	input := []any{map[string]any{"role": "user", "content": "list"}}
	resp, body := s.post("/v1/responses", map[string]any{"model": "gpt-4o", "input": input}, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	var r struct {
		Output []any `json:"output"`
	}
	_ = json.Unmarshal(body, &r)
	input = append(input, r.Output...)
	input = append(input, map[string]any{"type": "function_call_output", "call_id": lsCall.ID, "output": "a.go"})
	if resp, body := s.post("/v1/responses", map[string]any{"model": "gpt-4o", "input": input}, nil); resp.StatusCode != 200 {
		t.Fatalf("second call: %d %s", resp.StatusCode, body)
	}
	s.checkUpstream()

	s.fake.Reset()
	s.fake.Script(gatewaytest.Reply{Interleave: true, Thinking: "hmm", Text: "calling", ToolCalls: []gatewaytest.ToolCall{lsCall}}, gatewaytest.Reply{Text: "done"})
	msgs := []any{map[string]any{"role": "user", "content": "list please"}}
	resp, body = s.post("/v1/messages", map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 100, "stream": true, "messages": msgs}, nil)
	if resp.StatusCode != 200 || !strings.Contains(string(body), "message_stop") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	id := resp.Header.Get("X-Contextd-Session")
	want := []string{"user: list please", "assistant: calling call(call_ls)"}
	if got := s.waitLog(id, want); !slices.Equal(got, want) {
		t.Fatalf("interleaved stream recorded as %q", got)
	}
	msgs = append(msgs,
		map[string]any{"role": "assistant", "content": []any{
			map[string]any{"type": "thinking", "thinking": "hmm", "signature": "sig-hmm"},
			map[string]any{"type": "text", "text": "calling"},
			map[string]any{"type": "tool_use", "id": lsCall.ID, "name": lsCall.Name, "input": map[string]any{"path": "src"}}}},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": lsCall.ID, "content": "a.go"}}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, _ := json.Marshal(map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": msgs})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url("/v1/messages"), bytes.NewReader(b))
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("Content-Type", "application/json")
	r2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("the session's next call: %v", err)
	}
	r2.Body.Close()
	if got := r2.Header.Get("X-Contextd-History"); r2.StatusCode != 200 || got != "extended" {
		t.Errorf("next call: %d %s", r2.StatusCode, got)
	}
	s.checkUpstream()
}

// TestPromptCacheMarks: an Anthropic client's own cache marks stay on the
// messages it marked (with their ttl) and contextd adds none; without
// marks contextd places at most four; OpenAI's prompt_cache_key passes.
func TestPromptCacheMarks(t *testing.T) {
	s := start(t, nil)
	mark := map[string]any{"type": "ephemeral", "ttl": "1h"}
	msgs := []any{
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "task", "cache_control": mark}}},
		map[string]any{"role": "assistant", "content": "ok"},
		map[string]any{"role": "user", "content": "next"},
	}
	resp, body := s.post("/v1/messages", map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 10, "system": "sys", "messages": msgs}, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	got := s.fake.Requests()[0].Raw
	if n := bytes.Count(got, []byte(`"cache_control"`)); n != 1 || !bytes.Contains(got, []byte(`"ttl":"1h"`)) {
		t.Errorf("the client's mark (with its ttl) should be the only one: %d marks in %s", n, got)
	}
	resp, body = s.post("/v1/messages", map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 10, "system": "sys2", "messages": []any{
		map[string]any{"role": "user", "content": "task"}, map[string]any{"role": "assistant", "content": "ok"}, map[string]any{"role": "user", "content": "next"}}}, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	got = s.fake.Requests()[1].Raw
	if n := bytes.Count(got, []byte(`"cache_control"`)); n < 1 || n > 4 {
		t.Errorf("contextd placed %d marks: %s", n, got)
	}
	resp, body = s.post("/v1/chat/completions", map[string]any{"model": "gpt-4o", "prompt_cache_key": "agent-7", "messages": []any{map[string]any{"role": "user", "content": "hi"}}}, nil)
	if resp.StatusCode != 200 || !bytes.Contains(s.fake.Requests()[2].Raw, []byte(`"prompt_cache_key":"agent-7"`)) {
		t.Errorf("prompt_cache_key not passed: %s", s.fake.Requests()[2].Raw)
	}
	s.checkUpstream()
}

// TestWebPagesRefused: without API keys (the quickstart) a web page of
// another site cannot use the gateway through the user's browser: a
// request with a foreign Origin or Sec-Fetch-Site: cross-site is refused,
// a body that is not JSON (what a page may send without a preflight) is
// refused, and the provider's CORS grant is not passed on.
func TestWebPagesRefused(t *testing.T) {
	s := start(t, nil)
	body := []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
	send := func(ct string, h map[string]string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, s.url("/v1/chat/completions"), bytes.NewReader(body))
		req.Header.Set("Content-Type", ct)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for name, c := range map[string]struct {
		ct     string
		h      map[string]string
		status int
	}{
		"foreign origin":   {"application/json", map[string]string{"Origin": "https://evil.example"}, 403},
		"cross-site fetch": {"application/json", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		"text/plain body":  {"text/plain", nil, 415},
		"form body":        {"application/x-www-form-urlencoded", nil, 415},
	} {
		if resp := send(c.ct, c.h); resp.StatusCode != c.status {
			t.Errorf("%s: %d, want %d", name, resp.StatusCode, c.status)
		}
	}
	if n := len(s.fake.Requests()); n != 0 {
		t.Fatalf("%d refused requests reached the provider", n)
	}
	resp := send("application/json", map[string]string{"Origin": "http://localhost:3000"})
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("a local page: %d, Access-Control-Allow-Origin %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
}

// TestResultAfterClearGoesOn: a session cleared (through the API) while a
// tool call of the model was open has that call closed as interrupted; the
// client's real result for it then goes on in a session of its own (where
// the call and its result are whole) instead of being refused for good.
func TestResultAfterClearGoesOn(t *testing.T) {
	s := start(t, nil)
	s.fake.Script(gatewaytest.Reply{ToolCalls: []gatewaytest.ToolCall{lsCall}}, gatewaytest.Reply{Text: "done"}, gatewaytest.Reply{Text: "more"})
	msgs := []any{map[string]any{"role": "user", "content": "list src"}}
	resp, body := s.post("/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": msgs}, nil)
	id := resp.Header.Get("X-Contextd-Session")
	var out struct {
		Choices []struct {
			Message map[string]any `json:"message"`
		} `json:"choices"`
	}
	_ = json.Unmarshal(body, &out)
	if got := s.waitLog(id, []string{"user: list src", "assistant: call(call_ls)"}); len(got) != 2 {
		t.Fatalf("log %q", got)
	}
	s.rpc("ClearMessages", map[string]any{"sessionId": id}, nil)
	msgs = append(msgs, out.Choices[0].Message, map[string]any{"role": "tool", "tool_call_id": lsCall.ID, "content": "a.go"})
	resp, body = s.post("/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": msgs}, nil)
	fork := resp.Header.Get("X-Contextd-Session")
	if resp.StatusCode != 200 || fork == id {
		t.Fatalf("the result after the clear: %d in %s (%s): %s", resp.StatusCode, fork, resp.Header.Get("X-Contextd-History"), body)
	}
	msgs = append(msgs, map[string]any{"role": "assistant", "content": "done"}, map[string]any{"role": "user", "content": "and more?"})
	resp, body = s.post("/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": msgs}, nil)
	if resp.StatusCode != 200 || fork == "" || resp.Header.Get("X-Contextd-History") != "extended" {
		t.Fatalf("the next turn: %d in %s (%s): %s", resp.StatusCode, resp.Header.Get("X-Contextd-Session"), resp.Header.Get("X-Contextd-History"), body)
	}
	s.checkUpstream()
}
