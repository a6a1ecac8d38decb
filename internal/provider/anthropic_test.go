package provider_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/provider"
)

// countServer speaks Anthropic's POST /v1/messages/count_tokens.
type countServer struct {
	mode  string
	calls atomic.Int64
	body  atomic.Value
}

func (c *countServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.calls.Add(1)
	b, _ := io.ReadAll(r.Body)
	c.body.Store(string(b))
	if r.URL.Path != "/v1/messages/count_tokens" || r.Header.Get("X-Api-Key") != "k" || r.Header.Get("Anthropic-Version") == "" {
		http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	switch c.mode {
	case "500":
		http.Error(w, `{"type":"error","error":{"type":"api_error","message":"boom"}}`, http.StatusInternalServerError)
	case "slow":
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	case "malformed":
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"input_tokens": `))
	default:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"input_tokens": 1234}`))
	}
}

func request() (string, []chat.Tool, []chat.Message) {
	return "Be brief.", []chat.Tool{{Name: "bash", Description: "Run a command.", Parameters: `{"type":"object","properties":{"command":{"type":"string"}}}`}},
		[]chat.Message{
			{Role: chat.RoleUser, Parts: []chat.Part{{Type: chat.PartText, Text: "List files."}}},
			{Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: "t1", Name: "bash", Arguments: `{"command":"ls"}`}}}},
			{Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: "t1", Content: "a.go"}}}},
		}
}

func TestAnthropicCounter(t *testing.T) {
	srv := &countServer{}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	c := provider.NewAnthropicCounter(provider.Config{BaseURL: ts.URL, APIKey: "k", Timeout: 5 * time.Second, MaxRetries: 1})
	system, tools, msgs := request()
	n, cached, err := c.Count(t.Context(), "claude-sonnet-4-5", system, tools, msgs)
	if err != nil || n != 1234 || cached {
		t.Fatalf("count: %d cached=%v, %v", n, cached, err)
	}
	var body map[string]any
	_ = json.Unmarshal([]byte(srv.body.Load().(string)), &body)
	msgsOut, _ := body["messages"].([]any)
	if body["model"] != "claude-sonnet-4-5" || body["system"] != "Be brief." || len(msgsOut) != 3 ||
		!strings.Contains(srv.body.Load().(string), `"tool_use_id":"t1"`) || body["tools"] == nil {
		t.Errorf("request body: %s", srv.body.Load())
	}
	// The same content is answered from the cache.
	if n, cached, err := c.Count(t.Context(), "claude-sonnet-4-5", system, tools, msgs); n != 1234 || !cached || err != nil || srv.calls.Load() != 1 {
		t.Errorf("second count: %d cached=%v %v, %d calls", n, cached, err, srv.calls.Load())
	}
	// The failures through a client with a short timeout ("slow" waits it
	// out); the counts above through one whose timeout a stall cannot hit.
	c = provider.NewAnthropicCounter(provider.Config{BaseURL: ts.URL, APIKey: "k", Timeout: 300 * time.Millisecond, MaxRetries: 1})
	for _, mode := range []string{"500", "slow", "malformed"} {
		srv.mode = mode
		msgs[0].Parts[0].Text += " " + mode // new content: not cached
		if _, _, err := c.Count(t.Context(), "claude-sonnet-4-5", system, tools, msgs); err == nil {
			t.Errorf("%s: no error", mode)
		}
	}
	if _, _, err := c.Count(t.Context(), "claude-sonnet-4-5", system, tools, nil); err == nil {
		t.Error("an empty request was sent")
	}
}
