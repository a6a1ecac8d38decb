package gateway_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// turn is one message of a testdata transcript (testdata/corpus/README.md).
type turn struct {
	Role       string `json:"role"`
	Content    string `json:"content"`
	ToolCallID string `json:"tool_call_id"`
	ToolCalls  []struct {
		ID        string `json:"id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"tool_calls"`
}

func loadTurns(t *testing.T, name string) []turn {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot(), "testdata", "corpus", "dev", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []turn
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var m turn
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// client is an unmodified agent of one API shape: it keeps the whole
// history in that shape and resends it every call, adding the provider's
// answer as it got it.
type client interface {
	path() string
	body(model string) map[string]any
	add(m turn)              // a user or tool message from the transcript
	answer(body []byte) bool // the provider's answer; false when it is not one
}

// replayModels is a registry file with small windows, so the transcripts
// need compaction.
const replayModels = `{"models": [
 {"name": "small-gpt", "provider": "openai", "context_window": 24000, "max_output_tokens": 2000, "encoding": "o200k_base", "exact": true},
 {"name": "small-claude", "provider": "anthropic", "context_window": 24000, "max_output_tokens": 2000, "encoding": "cl100k_base", "expected_error": 0.2}]}`

// TestReplayTranscripts replays testdata transcripts through each door as
// an unmodified client would (the whole history every call, no session
// header) on a small window: every upstream request is one the provider
// accepts and fits the window, each transcript is one session, compactions
// happen, and the ledger is the fake's usage.
func TestReplayTranscripts(t *testing.T) {
	models := filepath.Join(t.TempDir(), "models.json")
	if err := os.WriteFile(models, []byte(replayModels), 0o600); err != nil {
		t.Fatal(err)
	}
	transcripts := []string{"mini-swe-agent-django-12125.jsonl", "mini-swe-agent-sqlfluff-1763.jsonl", "mini-swe-agent-sympy-20916.jsonl"}
	doors := map[string]func(system string) client{
		"chat": func(sys string) client {
			return &chatClient{msgs: []any{map[string]any{"role": "system", "content": sys}}}
		},
		"responses": func(sys string) client { return &responsesClient{instructions: sys} },
		"messages":  func(sys string) client { return &messagesClient{system: sys} },
	}
	for name, newClient := range doors {
		t.Run(name, func(t *testing.T) {
			s := start(t, map[string]string{"CONTEXTD_MODELS_FILE": models})
			model := "small-gpt"
			if name == "messages" {
				model = "small-claude"
			}
			for _, tr := range transcripts {
				s.fake.Reset()
				turns := loadTurns(t, tr)
				c := newClient(turns[0].Content)
				session, compacted, calls := "", 0, 0
				for i := 1; i < len(turns) && calls < 60; i++ {
					m := turns[i]
					if m.Role != "assistant" {
						c.add(m)
						continue
					}
					reply := gatewaytest.Reply{Text: m.Content}
					for _, tc := range m.ToolCalls {
						reply.ToolCalls = append(reply.ToolCalls, gatewaytest.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
					}
					if reply.Text == "" && len(reply.ToolCalls) == 0 {
						reply.Text = "(nothing)"
					}
					s.fake.Script(reply)
					resp, body := s.post(c.path(), c.body(model), nil)
					calls++
					if resp.StatusCode != http.StatusOK {
						t.Fatalf("%s call %d: %d %s", tr, calls, resp.StatusCode, body)
					}
					id := resp.Header.Get("X-Contextd-Session")
					if session == "" {
						session = id
					} else if id != "" || resp.Header.Get("X-Contextd-History") != "extended" {
						t.Fatalf("%s call %d: session %q, want %q (history %s)", tr, calls, id, session, resp.Header.Get("X-Contextd-History"))
					}
					if used, _ := strconv.ParseFloat(resp.Header.Get("X-Contextd-Used-Percent"), 64); used > 100 {
						t.Errorf("%s call %d: %.1f %% of the window sent", tr, calls, used)
					}
					if resp.Header.Get("X-Contextd-Compacted") == "true" {
						compacted++
					}
					if !c.answer(body) {
						t.Fatalf("%s call %d: not an answer: %s", tr, calls, body)
					}
				}
				s.checkUpstream()
				s.checkLedger(session)
				if compacted == 0 {
					t.Errorf("%s: no call compacted in %d calls", tr, calls)
				}
				// What the upstream got is smaller than what the client sent.
				reqs := s.fake.Requests()
				last := reqs[len(reqs)-1]
				sent, _ := json.Marshal(c.body(model))
				if len(last.Raw) >= len(sent) {
					t.Errorf("%s: the last upstream request (%d bytes) is not smaller than the client's history (%d bytes)", tr, len(last.Raw), len(sent))
				}
				t.Logf("%s: %d calls, %d compacted, upstream %d bytes vs client %d", tr, calls, compacted, len(last.Raw), len(sent))
			}
		})
	}
}

type chatClient struct{ msgs []any }

func (c *chatClient) path() string { return "/v1/chat/completions" }
func (c *chatClient) body(model string) map[string]any {
	return map[string]any{"model": model, "messages": c.msgs}
}
func (c *chatClient) add(m turn) {
	if m.Role == "tool" {
		c.msgs = append(c.msgs, map[string]any{"role": "tool", "tool_call_id": m.ToolCallID, "content": m.Content})
		return
	}
	c.msgs = append(c.msgs, map[string]any{"role": m.Role, "content": m.Content})
}
func (c *chatClient) answer(body []byte) bool {
	var r struct {
		Choices []struct {
			Message map[string]any `json:"message"`
		} `json:"choices"`
	}
	if json.Unmarshal(body, &r) != nil || len(r.Choices) == 0 {
		return false
	}
	c.msgs = append(c.msgs, r.Choices[0].Message)
	return true
}

type responsesClient struct {
	instructions string
	input        []any
}

func (c *responsesClient) path() string { return "/v1/responses" }
func (c *responsesClient) body(model string) map[string]any {
	return map[string]any{"model": model, "instructions": c.instructions, "input": c.input, "store": false}
}
func (c *responsesClient) add(m turn) {
	if m.Role == "tool" {
		c.input = append(c.input, map[string]any{"type": "function_call_output", "call_id": m.ToolCallID, "output": m.Content})
		return
	}
	c.input = append(c.input, map[string]any{"type": "message", "role": m.Role, "content": []any{map[string]any{"type": "input_text", "text": m.Content}}})
}
func (c *responsesClient) answer(body []byte) bool {
	var r struct {
		Output []any `json:"output"`
	}
	if json.Unmarshal(body, &r) != nil || len(r.Output) == 0 {
		return false
	}
	c.input = append(c.input, r.Output...)
	return true
}

type messagesClient struct {
	system string
	msgs   []map[string]any
}

func (c *messagesClient) path() string { return "/v1/messages" }
func (c *messagesClient) body(model string) map[string]any {
	return map[string]any{"model": model, "max_tokens": 1024, "system": c.system, "messages": c.msgs}
}

// add appends a user turn, merged into the previous user message (tool
// results first), as the API needs roles to alternate.
func (c *messagesClient) add(m turn) {
	block := map[string]any{"type": "text", "text": m.Content}
	if m.Role == "tool" {
		block = map[string]any{"type": "tool_result", "tool_use_id": m.ToolCallID, "content": m.Content}
	}
	if n := len(c.msgs); n > 0 && c.msgs[n-1]["role"] == "user" {
		c.msgs[n-1]["content"] = append(c.msgs[n-1]["content"].([]any), block)
		return
	}
	c.msgs = append(c.msgs, map[string]any{"role": "user", "content": []any{block}})
}
func (c *messagesClient) answer(body []byte) bool {
	var r struct {
		Role    string `json:"role"`
		Content []any  `json:"content"`
	}
	if json.Unmarshal(body, &r) != nil || r.Role != "assistant" {
		return false
	}
	c.msgs = append(c.msgs, map[string]any{"role": "assistant", "content": r.Content})
	return true
}
