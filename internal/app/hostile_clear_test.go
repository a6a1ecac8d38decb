package app

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// TestHostileClear: a tool call left open across ClearMessages, its result
// sent after the clear. The result is INVALID_ARGUMENT naming its
// tool_call_id (the clear recorded the call as interrupted), the view
// PrepareContext returns is one providers accept, and reverting the clear
// restores the conversation, valid. On both stores.
func TestHostileClear(t *testing.T) {
	onBothStoresEnv(t, map[string]string{}, func(t *testing.T, env map[string]string) {
		client := contextdv1.NewContextServiceClient(startServer(t, env))
		ctx := t.Context()
		if _, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: "c", Model: "gpt-4o"}); err != nil {
			t.Fatal(err)
		}
		call := &contextdv1.Message{Role: contextdv1.Role_ROLE_ASSISTANT, Parts: []*contextdv1.Part{
			{Kind: &contextdv1.Part_ToolCall{ToolCall: &contextdv1.ToolCallPart{Id: "c1", Name: "run", ArgumentsJson: "{}"}}}}}
		if _, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "c", Messages: []*contextdv1.Message{user("the task"), call}}); err != nil {
			t.Fatal(err)
		}
		cleared, err := client.ClearMessages(ctx, &contextdv1.ClearMessagesRequest{SessionId: "c", KeepFirstUserMessage: true})
		if err != nil {
			t.Fatal(err)
		}
		result := &contextdv1.Message{Role: contextdv1.Role_ROLE_TOOL, Parts: []*contextdv1.Part{
			{Kind: &contextdv1.Part_ToolResult{ToolResult: &contextdv1.ToolResultPart{ToolCallId: "c1", Content: "done"}}}}}
		_, err = client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "c", Messages: []*contextdv1.Message{result}})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(strings.Join(fieldViolations(t, err), ","), "tool_call_id") {
			t.Fatalf("a result for the call the clear closed: %v", err)
		}
		prep, err := client.PrepareContext(ctx, &contextdv1.PrepareContextRequest{SessionId: "c", Messages: []*contextdv1.Message{user("go on")}})
		if err != nil {
			t.Fatal(err)
		}
		var roles []string
		for _, m := range prep.GetMessages() {
			roles = append(roles, m.GetRole().String())
		}
		if strings.Join(roles, " ") != "ROLE_USER ROLE_USER" {
			t.Fatalf("view after the clear: %v", roles)
		}
		if _, err := client.RevertCompaction(ctx, &contextdv1.RevertCompactionRequest{SessionId: "c", CompactionId: cleared.GetCompaction().GetId()}); err != nil {
			t.Fatal(err)
		}
		page, err := client.GetMessages(ctx, &contextdv1.GetMessagesRequest{SessionId: "c"})
		if err != nil {
			t.Fatal(err)
		}
		roles = roles[:0]
		for _, m := range page.GetMessages() {
			roles = append(roles, m.GetRole().String())
		}
		if strings.Join(roles, " ") != "ROLE_USER ROLE_ASSISTANT ROLE_TOOL ROLE_USER" || page.GetMessages()[2].GetMetadata()["contextd.interrupted"] != "true" {
			t.Fatalf("view after the revert: %v", roles)
		}
	})
}
