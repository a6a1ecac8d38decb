// Package gateway_test drives contextd's OpenAI- and Anthropic-compatible
// gateway as agents do — with the official SDKs (openai-go,
// anthropic-sdk-go, and the npm openai and @anthropic-ai/sdk packages) and
// with plain HTTP — through the real server (app.Run on a loopback port)
// to a fake provider that speaks the providers' wire formats
// (internal/gateway/gatewaytest).
package gateway_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/app/apptest"
	"github.com/contextd/contextd/internal/gateway/gatewaytest"
	"github.com/contextd/contextd/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// server is a running contextd with a fake provider behind it.
type server struct {
	t    testing.TB
	addr string
	fake *gatewaytest.Fake
}

func (s *server) url(path string) string { return "http://" + s.addr + path }

// start runs contextd (embedded SQLite unless env names a database) with
// its gateway pointed at a new fake provider.
func start(t testing.TB, env map[string]string) *server {
	t.Helper()
	fake := gatewaytest.New()
	t.Cleanup(fake.Close)
	all := map[string]string{
		"CONTEXTD_OPENAI_BASE_URL":    fake.OpenAIBase(),
		"CONTEXTD_ANTHROPIC_BASE_URL": fake.AnthropicBase(),
	}
	for k, v := range env {
		all[k] = v
	}
	return &server{t: t, addr: apptest.Start(t, all), fake: fake}
}

// post sends a JSON body to the gateway and returns the response and its
// body.
func (s *server) post(path string, body any, header map[string]string) (*http.Response, []byte) {
	s.t.Helper()
	resp, out, err := s.send(path, body, header)
	if err != nil {
		s.t.Fatal(err)
	}
	return resp, out
}

// send is post for a goroutine other than the test's: it returns what
// fails instead of failing the test.
func (s *server) send(path string, body any, header map[string]string) (*http.Response, []byte, error) {
	b, ok := body.([]byte)
	if !ok {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return nil, nil, err
		}
	}
	req, _ := http.NewRequest(http.MethodPost, s.url(path), bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if strings.HasPrefix(path, "/v1/messages") {
		req.Header.Set("anthropic-version", "2023-06-01")
		req.Header.Set("x-api-key", "sk-ant-test")
	} else {
		req.Header.Set("Authorization", "Bearer sk-test")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp, out, err
}

// rpc calls one of contextd's own RPCs over Connect (HTTP/JSON).
func (s *server) rpc(method string, req any, out any) {
	s.t.Helper()
	b, _ := json.Marshal(req)
	resp, err := http.Post(s.url("/contextd.v1.ContextService/"+method), "application/json", bytes.NewReader(b))
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		s.t.Fatalf("%s: %d %s", method, resp.StatusCode, body)
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			s.t.Fatalf("%s: %v: %s", method, err, body)
		}
	}
}

// logOf returns the texts of a session's log (role: text, or the tool
// call/result ids), to compare what was stored.
func (s *server) logOf(id string) []string {
	s.t.Helper()
	var page struct {
		Messages []struct {
			Role  string `json:"role"`
			Parts []struct {
				Text *struct {
					Text string `json:"text"`
				} `json:"text"`
				ToolCall *struct {
					ID string `json:"id"`
				} `json:"toolCall"`
				ToolResult *struct {
					ToolCallID string `json:"toolCallId"`
				} `json:"toolResult"`
			} `json:"parts"`
		} `json:"messages"`
	}
	s.rpc("GetMessages", map[string]any{"sessionId": id, "view": "MESSAGE_VIEW_LOG", "pageSize": 1000}, &page)
	var out []string
	for _, m := range page.Messages {
		line := strings.ToLower(strings.TrimPrefix(m.Role, "ROLE_")) + ":"
		for _, p := range m.Parts {
			switch {
			case p.ToolCall != nil:
				line += " call(" + p.ToolCall.ID + ")"
			case p.ToolResult != nil:
				line += " result(" + p.ToolResult.ToolCallID + ")"
			case p.Text != nil:
				line += " " + p.Text.Text
			}
		}
		out = append(out, line)
	}
	return out
}

// checkUpstream fails the test when the fake received a request the
// provider would refuse.
func (s *server) checkUpstream() {
	s.t.Helper()
	for i, r := range s.fake.Requests() {
		if len(r.Problems) > 0 {
			s.t.Errorf("upstream request %d (%s) would be refused: %v\n%s", i, r.Path, r.Problems, r.Raw)
		}
	}
}

func repoRoot() string {
	wd, _ := os.Getwd()
	return filepath.Join(wd, "..", "..")
}

// checkLedger fails the test unless the sessions' ledgers hold exactly
// the usage the fake billed, summed, field by field: calls, uncached
// input, cache reads, cache writes and output tokens.
func (s *server) checkLedger(ids ...string) {
	s.t.Helper()
	calls, ledger := s.waitRecorded(ids...)
	if billed := s.fake.BilledTotals(); ledger != billed || calls != int64(s.fake.Billed()) {
		s.t.Errorf("ledgers: %d calls, %+v; the fake billed %d calls, %+v", calls, ledger, s.fake.Billed(), billed)
	}
}

// waitRecorded waits until the sessions' ledgers hold as many calls as
// the fake billed (or ten seconds passed) and returns them: every call
// (all of them billed to these sessions) is then recorded, its usage and
// its reply in one transaction, which the gateway writes just after
// relaying the answer. A test that reads a session's usage or log right
// after its answer races that recording.
func (s *server) waitRecorded(ids ...string) (int64, gatewaytest.Bill) {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		calls, ledger := apptest.Ledger(s.t, s.addr, ids...)
		if calls >= int64(s.fake.Billed()) || time.Now().After(deadline) {
			return calls, ledger
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitLog returns the session's log once it is want, or what it is after
// ten seconds: the gateway records a reply just after relaying it.
func (s *server) waitLog(id string, want []string) []string {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := s.logOf(id)
		if slices.Equal(got, want) || time.Now().After(deadline) {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// firstExchange makes a Chat Completions conversation whose first call
// ("q0", answered "a0") is recorded: its session and the history so far.
func (s *server) firstExchange() (string, []any) {
	s.t.Helper()
	history := []any{map[string]any{"role": "user", "content": "q0"}}
	s.fake.Script(gatewaytest.Reply{Text: "a0"})
	resp, body := s.post("/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": history}, nil)
	if resp.StatusCode != http.StatusOK {
		s.t.Fatalf("first call: %d %s", resp.StatusCode, body)
	}
	session := resp.Header.Get("X-Contextd-Session")
	want := []string{"user: q0", "assistant: a0"}
	if got := s.waitLog(session, want); !slices.Equal(got, want) {
		s.t.Fatalf("log after the first call:\n got %q\nwant %q", got, want)
	}
	return session, history
}
