package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/contextd/contextd/clients/go/expand"
	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

var (
	placeholderID = regexp.MustCompile(`contextd_expand with id "([^"]+)"`)
	nextOffset    = regexp.MustCompile(`More follows: call contextd_expand with \{"id":"[^"]+","offset":(\d+)(?:,"cursor":"\d+:\d+")?\}`)
)

// expandAgent is a session of a coding agent with the expand tool on, whose
// old tool results (two-, three- and four-byte UTF-8 among ASCII) the first
// PrepareContext prunes; contents maps each tool call id to its result.
func expandAgent(t *testing.T, c contextdv1.ContextServiceClient, id string) map[string]string {
	t.Helper()
	on := true
	ctx := t.Context()
	if _, err := c.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: id, Model: "gpt-4",
		Policy: &contextdv1.CompactionPolicy{ExposeExpandTool: &on}}); err != nil {
		t.Fatal(err)
	}
	contents := map[string]string{}
	msgs := []*contextdv1.Message{{Role: contextdv1.Role_ROLE_USER, Parts: []*contextdv1.Part{text("Fix the failing test.")}}}
	for i := 0; i < 16; i++ {
		call := fmt.Sprintf("call_%d", i)
		contents[call] = fmt.Sprintf("step %d: %s", i, strings.Repeat("lorem ipsum é dolor € sit 😀 amet ", 45))
		msgs = append(msgs, toolCall(call, "read", `{"path":"x"}`), toolResult(call, contents[call]))
	}
	if _, err := c.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: id, Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	return contents
}

func toolCall(id, name, args string) *contextdv1.Message {
	return &contextdv1.Message{Role: contextdv1.Role_ROLE_ASSISTANT, Parts: []*contextdv1.Part{{Kind: &contextdv1.Part_ToolCall{
		ToolCall: &contextdv1.ToolCallPart{Id: id, Name: name, ArgumentsJson: args}}}}}
}

func toolResult(id, content string) *contextdv1.Message {
	return &contextdv1.Message{Role: contextdv1.Role_ROLE_TOOL, Parts: []*contextdv1.Part{{Kind: &contextdv1.Part_ToolResult{
		ToolResult: &contextdv1.ToolResultPart{ToolCallId: id, Content: content}}}}}
}

// fakeModel reads the view as a model would: the first time it sees a
// placeholder it calls contextd_expand with the id the placeholder names,
// follows "More follows" offsets 500 bytes at a time, and when the text
// ends answers with it. With greedy it never stops expanding.
type fakeModel struct {
	greedy    bool
	id, call  string // the placeholder's id, and its tool call id
	offset    string
	collected strings.Builder
	calls     int
}

func (m *fakeModel) turn(view []*contextdv1.Message, tools []*contextdv1.ToolDefinition) (call *contextdv1.ToolCallPart, answer string) {
	offered := false
	for _, t := range tools {
		offered = offered || t.GetName() == expand.ToolName
	}
	if !offered {
		return nil, "no expand tool"
	}
	last := view[len(view)-1].GetParts()[0].GetToolResult()
	switch {
	case m.id == "":
		for _, msg := range view {
			if r := msg.GetParts()[0].GetToolResult(); msg.GetKind() == contextdv1.MessageKind_MESSAGE_KIND_PLACEHOLDER && r != nil {
				if ids := placeholderID.FindStringSubmatch(r.GetContent()); ids != nil {
					m.id, m.call, m.offset = ids[1], r.GetToolCallId(), "0"
					break
				}
			}
		}
		if m.id == "" {
			return nil, "no placeholder"
		}
	case last == nil:
		return nil, "no tool result"
	case m.greedy:
	default:
		note, body, _ := strings.Cut(last.GetContent(), "\n")
		m.collected.WriteString(body)
		next := nextOffset.FindStringSubmatch(note)
		if next == nil {
			return nil, m.collected.String()
		}
		m.offset = next[1]
	}
	m.calls++
	return &contextdv1.ToolCallPart{Id: fmt.Sprintf("x%d", m.calls), Name: expand.ToolName,
		ArgumentsJson: fmt.Sprintf(`{"id":%q,"offset":%s,"length":500}`, m.id, m.offset)}, ""
}

// runTurn is an agent's loop for one user turn: PrepareContext with what
// happened, the model, the expand calls answered by the helper (one round
// per model response), until the model answers or is stopped.
func runTurn(ctx context.Context, t *testing.T, c contextdv1.ContextServiceClient, session string, m *fakeModel) (answer string, rounds int32, stopped *expand.Result) {
	pending := []*contextdv1.Message{{Role: contextdv1.Role_ROLE_USER, Parts: []*contextdv1.Part{text("Go on.")}}}
	for {
		prepared, err := c.PrepareContext(ctx, &contextdv1.PrepareContextRequest{SessionId: session, Messages: pending})
		if err != nil {
			t.Fatal(err)
		}
		call, answer := m.turn(prepared.GetMessages(), expand.ModelTools(nil, prepared))
		if call == nil {
			return answer, rounds, stopped
		}
		rounds++
		res, ok, err := expand.Answer(ctx, c, session, prepared, call, rounds)
		if err != nil || !ok {
			t.Fatalf("answer: %v, %v", ok, err)
		}
		pending = []*contextdv1.Message{{Role: contextdv1.Role_ROLE_ASSISTANT, Parts: []*contextdv1.Part{{Kind: &contextdv1.Part_ToolCall{ToolCall: call}}}}, res.Message}
		if res.Stop {
			if _, err := c.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: session, Messages: pending}); err != nil {
				t.Fatal(err)
			}
			return "", rounds, &res
		}
	}
}

// TestExpandToolGoHelper: a fake model expands the placeholder it sees
// through the Go helper and gets the pruned tool output back byte for byte;
// a model that keeps expanding is stopped at the round limit.
func TestExpandToolGoHelper(t *testing.T) {
	bin := build(t, t.TempDir(), "contextd", "./cmd/server")
	srv := startProc(t, bin, "CONTEXTD_DATA_DIR="+filepath.Join(t.TempDir(), "data"), "CONTEXTD_EXPAND_MAX_ROUNDS=6")
	c := contextdv1.NewContextServiceClient(srv.conn)
	ctx := t.Context()

	contents := expandAgent(t, c, "go-expand")
	m := &fakeModel{}
	answer, rounds, stopped := runTurn(ctx, t, c, "go-expand", m)
	if stopped != nil || m.id == "" || answer != contents[m.call] {
		t.Fatalf("expanded %q (%d bytes, %d rounds, stopped %v); the original is %d bytes", m.id, len(answer), rounds, stopped != nil, len(contents[m.call]))
	}
	if rounds < 3 {
		t.Errorf("%d rounds for %d bytes at 500 a round", rounds, len(answer))
	}

	expandAgent(t, c, "go-greedy")
	greedy := &fakeModel{greedy: true}
	_, rounds, stopped = runTurn(ctx, t, c, "go-greedy", greedy)
	if stopped == nil {
		t.Fatalf("the greedy model was never stopped (%d rounds)", rounds)
	}
	content := stopped.Message.GetParts()[0].GetToolResult()
	if rounds != 7 || !content.GetIsError() || !strings.Contains(content.GetContent(), "answer with what you have") {
		t.Errorf("greedy model: %d rounds, %v", rounds, content)
	}

	// Another tool's call is the caller's; so is a call named
	// contextd_expand when the option is off (a client tool of that name):
	// the helper does not take it over. A bad round is InvalidArgument.
	prepared, err := c.PrepareContext(ctx, &contextdv1.PrepareContextRequest{SessionId: "go-expand"})
	if err != nil || !expand.Offered(prepared) {
		t.Fatalf("prepare: %v, offered %v", err, expand.Offered(prepared))
	}
	if _, ok, err := expand.Answer(ctx, c, "go-expand", prepared, &contextdv1.ToolCallPart{Id: "y", Name: "read"}, 1); ok || err != nil {
		t.Errorf("another tool: %v, %v", ok, err)
	}
	mine := &contextdv1.ToolDefinition{Name: expand.ToolName, Description: "The client's own.", ParametersJson: `{"type":"object"}`}
	if _, err := c.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: "go-own-tool", Model: "gpt-4", Tools: []*contextdv1.ToolDefinition{mine}}); err != nil {
		t.Fatal(err)
	}
	prepared, err = c.PrepareContext(ctx, &contextdv1.PrepareContextRequest{SessionId: "go-own-tool"})
	if err != nil || expand.Offered(prepared) {
		t.Fatalf("prepare with the option off: %v, offered %v", err, expand.Offered(prepared))
	}
	call := &contextdv1.ToolCallPart{Id: "z", Name: expand.ToolName, ArgumentsJson: `{"id":"msg_1"}`}
	if res, ok, err := expand.Answer(ctx, c, "go-own-tool", prepared, call, 1); ok || err != nil || res.Message != nil {
		t.Errorf("the client's own contextd_expand was taken over: %v, %v, %v", ok, err, res.Message)
	}
	_, err = c.ExpandToolCall(ctx, &contextdv1.ExpandToolCallRequest{SessionId: "go-expand", Arguments: `{"id":"msg_3"}`, Round: 0})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "round") {
		t.Errorf("round 0: %v", err)
	}
}
