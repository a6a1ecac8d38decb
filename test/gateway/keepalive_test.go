package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// TestExpandLoopKeepalive: a streamed answer the expand loop holds longer
// than CONTEXTD_GATEWAY_KEEPALIVE starts at once with its headers and SSE
// comment lines, which the SDKs skip: through each door they read the final
// answer as before. An upstream failure after the stream began reaches the
// SDK as the provider's stream error (raised, in words that do not name the
// tool), never as a silently cut answer.
func TestExpandLoopKeepalive(t *testing.T) {
	big := bigOutput()
	doors := map[string]func(s *server, stream bool) agent{
		"chat": newChatAgent, "responses": newResponsesAgent, "anthropic": newAnthropicAgent,
	}
	slow := func(f *gatewaytest.Fake) {
		f.Expand = gatewaytest.ExpandOnce
		f.Before = func(string) { time.Sleep(120 * time.Millisecond) } // each upstream call thinks
	}
	for _, door := range []string{"chat", "responses", "anthropic"} {
		t.Run(door, func(t *testing.T) {
			s := start(t, map[string]string{"CONTEXTD_GATEWAY_KEEPALIVE": "30ms"})
			a := doors[door](s, true)
			id := expandSetup(t, s, a, big)
			s.fake.Set(slow)
			a.user("Show me that listing again.")
			got := a.ask(t)
			if want := fmt.Sprintf("read %d bytes of ", len(big)); !strings.HasPrefix(got.text, want) || got.callID != "" ||
				strings.Contains(got.raw, "contextd_expand") || strings.Contains(fmt.Sprint(got.header), "contextd_expand") {
				t.Fatalf("client got %+v, want the final answer %q...", got, want)
			}
			if got.header.Get("X-Contextd-History") != "extended" || !strings.HasPrefix(got.header.Get("Content-Type"), "text/event-stream") {
				t.Errorf("headers %v", got.header)
			}
			s.checkLedger(id)

			// The upstream fails in the middle of the next loop, after the
			// stream began.
			n := len(s.fake.Requests())
			s.fake.Set(func(f *gatewaytest.Fake) {
				slow(f)
				f.FailFrom, f.FailMessage = n+2, "tool contextd_expand: output too long"
			})
			a.user("And once more.")
			_, err := a.try(t)
			// In the stream: the Go SDKs say "while streaming" (OpenAI) or
			// give the 200 the stream began with (Anthropic).
			inStream := err != nil && (strings.Contains(err.Error(), "while streaming") || strings.Contains(err.Error(), "200 OK"))
			if !inStream || strings.Contains(err.Error(), "contextd_expand") || !strings.Contains(err.Error(), "the provider answered 500") {
				t.Errorf("the SDK got %v, want the provider's 500 as a stream error not naming the tool", err)
			}
			s.checkLedger(id) // the calls billed before the failure

			// The final answer comes as JSON though the stream began: an
			// error event, not a JSON body inside the stream.
			s.fake.Set(func(f *gatewaytest.Fake) {
				slow(f)
				f.FailFrom, f.NoStream = 0, true
			})
			a.user("Once more.")
			_, err = a.try(t)
			if err == nil || !strings.Contains(err.Error(), "without a stream") || strings.Contains(err.Error(), "contextd_expand") {
				t.Errorf("a JSON answer after the stream began: the SDK got %v", err)
			}
		})
	}
}

// TestExpandLoopKeepaliveWire: on the wire, a held stream starts with SSE
// comment lines and then carries the final answer's events, as the
// provider sent them.
func TestExpandLoopKeepaliveWire(t *testing.T) {
	s := start(t, map[string]string{"CONTEXTD_GATEWAY_KEEPALIVE": "30ms"})
	a := newChatAgent(s, true)
	expandSetup(t, s, a, bigOutput())
	s.fake.Set(func(f *gatewaytest.Fake) {
		f.Expand = gatewaytest.ExpandOnce
		f.Before = func(string) { time.Sleep(120 * time.Millisecond) }
	})
	req, _ := http.NewRequest(http.MethodPost, s.url("/v1/chat/completions"), strings.NewReader(`{"model":"gpt-4o","stream":true,"messages":[`+
		`{"role":"system","content":"You are terse."},{"role":"user","content":"What is in src?"},`+
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_ls","type":"function","function":{"name":"ls","arguments":"{\"path\":\"src\"}"}}]},`+
		fmt.Sprintf(`{"role":"tool","tool_call_id":"call_ls","content":%q},`, bigOutput())+
		`{"role":"assistant","content":"listed"},{"role":"user","content":"Show me that listing again."}],`+
		`"tools":[{"type":"function","function":{"name":"ls","description":"list a directory","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}}]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	text := string(body)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(text, ": ") || strings.Count(text, "\n: ") < 2 {
		t.Fatalf("%d, want a stream that starts with comment lines:\n%.400s", resp.StatusCode, text)
	}
	if strings.Contains(text, "contextd_expand") || !strings.Contains(text, "read ") || !strings.HasSuffix(text, "data: [DONE]\n\n") {
		t.Errorf("the stream after the comments is not the final answer:\n%s", text)
	}
}
