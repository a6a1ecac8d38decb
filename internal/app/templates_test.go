package app

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// goldenChatRequest is one line of testdata/golden/openweights/chat_requests.jsonl.
type goldenChatRequest struct {
	Name     string `json:"name"`
	System   string `json:"system"`
	Messages []struct {
		Role      string   `json:"role"`
		Content   string   `json:"content"`
		Parts     []string `json:"parts"` // text parts, in place of content
		ToolCalls []struct {
			ID        string          `json:"id"`
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"tool_calls"`
		ToolCallID string `json:"tool_call_id"`
	} `json:"messages"`
	Tools []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"tools"`
}

func (g goldenChatRequest) proto() ([]*contextdv1.ToolDefinition, []*contextdv1.Message) {
	var tools []*contextdv1.ToolDefinition
	for _, t := range g.Tools {
		tools = append(tools, &contextdv1.ToolDefinition{Name: t.Name, Description: t.Description, ParametersJson: string(t.Parameters)})
	}
	roles := map[string]contextdv1.Role{"user": contextdv1.Role_ROLE_USER, "assistant": contextdv1.Role_ROLE_ASSISTANT,
		"tool": contextdv1.Role_ROLE_TOOL, "system": contextdv1.Role_ROLE_SYSTEM}
	var msgs []*contextdv1.Message
	for _, m := range g.Messages {
		pm := &contextdv1.Message{Role: roles[m.Role]}
		switch {
		case m.Role == "tool":
			pm.Parts = append(pm.Parts, &contextdv1.Part{Kind: &contextdv1.Part_ToolResult{ToolResult: &contextdv1.ToolResultPart{ToolCallId: m.ToolCallID, Content: m.Content}}})
		case len(m.Parts) > 0:
			for _, p := range m.Parts {
				pm.Parts = append(pm.Parts, text(p))
			}
		case m.Content != "" || len(m.ToolCalls) == 0:
			pm.Parts = append(pm.Parts, text(m.Content))
		}
		for _, c := range m.ToolCalls {
			pm.Parts = append(pm.Parts, &contextdv1.Part{Kind: &contextdv1.Part_ToolCall{ToolCall: &contextdv1.ToolCallPart{Id: c.ID, Name: c.Name, ArgumentsJson: string(c.Arguments)}}})
		}
		msgs = append(msgs, pm)
	}
	return tools, msgs
}

// systemLater reports whether a request has a system message after its start.
func systemLater(g goldenChatRequest) bool {
	for _, m := range g.Messages {
		if m.Role == "system" {
			return true
		}
	}
	return false
}

func readGoldenLines[T any](t *testing.T, name string) []T {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "testdata", "golden", "openweights", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// TestChatTemplatesOverGRPC: through the server, CountTokens of each golden
// chat request equals apply_chat_template's length for models registered on
// a template family, and so does a session holding that request
// (GetContextUsage), for DeepSeek V3, whose template renders each message
// the same whatever its neighbours.
func TestChatTemplatesOverGRPC(t *testing.T) {
	reqs := readGoldenLines[goldenChatRequest](t, "chat_requests.jsonl")
	counts := readGoldenLines[map[string]any](t, "chat_counts.jsonl")
	client := contextdv1.NewContextServiceClient(startServer(t, map[string]string{}))
	ctx := t.Context()
	for _, family := range []struct {
		template, model string
		session         bool
	}{{"deepseek_v3", "deepseek-v3", true}, {"qwen2.5", "qwen2.5-7b", false}, {"qwen3", "qwen3-32b", false}, {"harmony", "gpt-oss-120b", false}} {
		for i, g := range reqs {
			want, ok := counts[i][family.template].(float64)
			if !ok {
				t.Fatalf("chat_counts.jsonl line %d has no %s count", i+1, family.template)
			}
			tools, msgs := g.proto()
			got, err := client.CountTokens(ctx, &contextdv1.CountTokensRequest{Model: family.model, SystemPrompt: g.System, Tools: tools, Messages: msgs})
			if err != nil {
				t.Fatalf("%s %s: %v", family.model, g.Name, err)
			}
			if got.GetTotalTokens() != int64(want) || !got.GetExact() {
				t.Errorf("%s %s: CountTokens %d (exact %v), apply_chat_template %d", family.model, g.Name, got.GetTotalTokens(), got.GetExact(), int64(want))
			}
			if !family.session || systemLater(g) {
				continue // a later system message joins the system prompt: stored, it counts on its own
			}
			id := fmt.Sprintf("%s-%d", family.template, i)
			if _, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: id, Model: family.model, SystemPrompt: g.System, Tools: tools}); err != nil {
				t.Fatal(err)
			}
			if len(msgs) > 0 { // AppendMessages takes at least one
				if _, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: id, Messages: msgs}); err != nil {
					t.Fatalf("%s: %v", g.Name, err)
				}
			}
			usage, err := client.GetContextUsage(ctx, &contextdv1.GetContextUsageRequest{Source: &contextdv1.GetContextUsageRequest_SessionId{SessionId: id}})
			if err != nil {
				t.Fatal(err)
			}
			if used := usage.GetUsage().GetUsedTokens(); used != int64(want) {
				t.Errorf("%s %s: session uses %d tokens, apply_chat_template %d", family.model, g.Name, used, int64(want))
			}
		}
	}
}
