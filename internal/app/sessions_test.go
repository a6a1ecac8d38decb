package app

import (
	"os"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
	"github.com/contextd/contextd/internal/pgtest"
)

func TestMain(m *testing.M) {
	if os.Getenv(serverProcessEnv) == "1" { // the server of TestCountBudgetBoundsMemory, in its own process
		os.Exit(serveProcess())
	}
	pgtest.Main(m)
}

func user(s string) *contextdv1.Message {
	return &contextdv1.Message{Role: contextdv1.Role_ROLE_USER, Parts: []*contextdv1.Part{text(s)}}
}

// TestSessionRPCs drives the session RPCs over gRPC on both backends and
// checks the status codes each failure maps to.
func TestSessionRPCs(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			env := map[string]string{"CONTEXTD_MAX_MESSAGE_BYTES": "65536"}
			if backend == "postgres" {
				env["CONTEXTD_DATABASE_URL"] = pgtest.URL(t)
			}
			client := contextdv1.NewContextServiceClient(startServer(t, env))
			ctx := t.Context()

			created, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: "agent-1", Model: "gpt-4o",
				SystemPrompt: "You are terse.", Labels: map[string]string{"team": "infra"}})
			if err != nil {
				t.Fatal(err)
			}
			if s := created.GetSession(); s.GetVersion() != 1 || s.GetUsage().GetSystemTokens() == 0 {
				t.Errorf("created: %v", s)
			}
			if _, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: "agent-1", Model: "gpt-4o"}); status.Code(err) != codes.AlreadyExists {
				t.Errorf("duplicate id: %v", err)
			}
			if _, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: "bad id!", Model: "gpt-4o"}); status.Code(err) != codes.InvalidArgument {
				t.Errorf("bad id: %v", err)
			}

			app, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "agent-1",
				Messages: []*contextdv1.Message{user("hello"), user("again")}, IdempotencyKey: "k"})
			if err != nil {
				t.Fatal(err)
			}
			if app.GetVersion() != 2 || len(app.GetMessages()) != 2 || app.GetMessages()[1].GetPosition() != 2 || app.GetMessages()[0].GetTokens() == 0 {
				t.Errorf("append: %v", app)
			}
			stale := int64(1)
			_, err = client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "agent-1",
				Messages: []*contextdv1.Message{user("late")}, ExpectedVersion: &stale})
			if status.Code(err) != codes.Aborted {
				t.Errorf("stale version: %v", err)
			}
			_, err = client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "agent-1",
				Messages: []*contextdv1.Message{user("other")}, IdempotencyKey: "k"})
			if status.Code(err) != codes.FailedPrecondition {
				t.Errorf("reused idempotency key: %v", err)
			}
			_, err = client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "agent-1",
				Messages: []*contextdv1.Message{{Role: contextdv1.Role_ROLE_TOOL, Parts: []*contextdv1.Part{
					{Kind: &contextdv1.Part_ToolResult{ToolResult: &contextdv1.ToolResultPart{ToolCallId: "ghost", Content: "x"}}}}}}})
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `"ghost"`) ||
				fieldViolations(t, err)[0] != "messages[0].parts[0].tool_result.tool_call_id" {
				t.Errorf("dangling tool result: %v", err)
			}
			_, err = client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "agent-1", Messages: []*contextdv1.Message{}})
			if status.Code(err) != codes.InvalidArgument {
				t.Errorf("empty batch: %v", err)
			}
			_, err = client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "agent-1",
				Messages: []*contextdv1.Message{user(strings.Repeat("x", 70_000))}})
			if status.Code(err) != codes.ResourceExhausted {
				t.Errorf("over-size message: %v", err)
			}
			if _, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "nope",
				Messages: []*contextdv1.Message{user("x")}}); status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), `"nope"`) {
				t.Errorf("unknown session: %v", err)
			}

			usage, err := client.GetContextUsage(ctx, &contextdv1.GetContextUsageRequest{
				Source: &contextdv1.GetContextUsageRequest_SessionId{SessionId: "agent-1"}})
			if err != nil {
				t.Fatal(err)
			}
			if u := usage.GetUsage(); u.GetMessageCount() != 2 || u.GetUsedTokens() != app.GetUsage().GetUsedTokens() {
				t.Errorf("usage %v, after append %v", u, app.GetUsage())
			}
			msgs, err := client.GetMessages(ctx, &contextdv1.GetMessagesRequest{SessionId: "agent-1", View: contextdv1.MessageView_MESSAGE_VIEW_LOG})
			if err != nil || len(msgs.GetMessages()) != 2 || msgs.GetMessages()[0].GetParts()[0].GetText().GetText() != "hello" {
				t.Errorf("log: %v, %v", msgs, err)
			}
			list, err := client.ListSessions(ctx, &contextdv1.ListSessionsRequest{Labels: map[string]string{"team": "infra"}})
			if err != nil || len(list.GetSessions()) != 1 {
				t.Errorf("list: %v, %v", list, err)
			}
			if _, err := client.DeleteSession(ctx, &contextdv1.DeleteSessionRequest{SessionId: "agent-1"}); err != nil {
				t.Fatal(err)
			}
			if _, err := client.GetSession(ctx, &contextdv1.GetSessionRequest{SessionId: "agent-1"}); status.Code(err) != codes.NotFound {
				t.Errorf("deleted session: %v", err)
			}
		})
	}
}
