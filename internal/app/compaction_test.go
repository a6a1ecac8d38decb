package app

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

func toolStep(id, output string) []*contextdv1.Message {
	return []*contextdv1.Message{
		{Role: contextdv1.Role_ROLE_ASSISTANT, Parts: []*contextdv1.Part{text("Let me check."), {Kind: &contextdv1.Part_ToolCall{
			ToolCall: &contextdv1.ToolCallPart{Id: id, Name: "bash", ArgumentsJson: `{"command":"cat src/main.py"}`}}}}},
		{Role: contextdv1.Role_ROLE_TOOL, Parts: []*contextdv1.Part{{Kind: &contextdv1.Part_ToolResult{
			ToolResult: &contextdv1.ToolResultPart{ToolCallId: id, Content: output}}}}},
	}
}

// TestAgentLoopOverGRPC runs a 120-message agent loop through PrepareContext
// on an 8k-token model: the request never exceeds the window, compaction
// happens on its own, and every later call succeeds. Then it exercises the
// compaction RPCs.
func TestAgentLoopOverGRPC(t *testing.T) {
	client := contextdv1.NewContextServiceClient(startServer(t, map[string]string{}))
	ctx := t.Context()
	if _, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: "loop", Model: "gpt-4",
		SystemPrompt: "You are a coding agent."}); err != nil {
		t.Fatal(err)
	}
	next := []*contextdv1.Message{user("Make the tests in src/ pass.")}
	compactions := 0
	for i := 0; i < 60; i++ {
		resp, err := client.PrepareContext(ctx, &contextdv1.PrepareContextRequest{SessionId: "loop", Messages: next})
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		u := resp.GetStatus().GetUsage()
		if u.GetOverTokens() > 0 || u.GetUsedTokens() > u.GetContextWindow()-u.GetReservedOutputTokens() {
			t.Fatalf("step %d: %d tokens exceed the window", i, u.GetUsedTokens())
		}
		if resp.GetStatus().GetCompacted() {
			compactions++
		}
		if got := resp.GetMessages()[0].GetParts()[0].GetText().GetText(); got != "Make the tests in src/ pass." {
			t.Fatalf("step %d: the task is gone: %q", i, got)
		}
		next = toolStep(fmt.Sprintf("call_%d", i), fmt.Sprintf("run %d\n%s", i, strings.Repeat("FAILED tests/test_main.py::test_x - AssertionError\n", 12)))
	}
	if compactions == 0 {
		t.Fatal("120 messages on an 8k window never compacted")
	}

	list, err := client.ListCompactions(ctx, &contextdv1.ListCompactionsRequest{SessionId: "loop"})
	if err != nil || len(list.GetCompactions()) != compactions {
		t.Fatalf("list: %d compactions (%v), PrepareContext reported %d", len(list.GetCompactions()), err, compactions)
	}
	last := list.GetCompactions()[len(list.GetCompactions())-1]
	if len(last.GetItems()) == 0 || last.GetExpiresAt() == nil {
		t.Errorf("record: %v", last)
	}
	x, err := client.ExpandMessage(ctx, &contextdv1.ExpandMessageRequest{SessionId: "loop", MessageId: last.GetItems()[0].GetNewMessageId()})
	if err != nil || len(x.GetOriginals()) == 0 {
		t.Errorf("expand: %v, %v", x, err)
	}
	dry, err := client.Compact(ctx, &contextdv1.CompactRequest{SessionId: "loop", DryRun: true, Tier: contextdv1.CompactionTier_COMPACTION_TIER_PRUNE})
	if err != nil || dry.GetCompacted() || !dry.GetDryRun() {
		t.Errorf("dry run: %v, %v", dry, err)
	}
	rev, err := client.RevertCompaction(ctx, &contextdv1.RevertCompactionRequest{SessionId: "loop", CompactionId: last.GetId()})
	if err != nil || rev.GetSession().GetVersion() == 0 {
		t.Errorf("revert: %v, %v", rev, err)
	}
	_, err = client.RevertCompaction(ctx, &contextdv1.RevertCompactionRequest{SessionId: "loop", CompactionId: last.GetId()})
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("second revert: %v", err)
	}
	h, err := client.CreateHandoff(ctx, &contextdv1.CreateHandoffRequest{SessionId: "loop", CreateSession: true, NewSessionId: "loop-2"})
	if err != nil || !strings.Contains(h.GetDocument(), "## NEXT") || h.GetSession().GetId() != "loop-2" {
		t.Errorf("handoff: %v, %v", h.GetSession(), err)
	}
	off := false
	if _, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: "manual", Model: "gpt-4",
		Policy: &contextdv1.CompactionPolicy{AutoCompact: &off}}); err != nil {
		t.Fatal(err)
	}
	huge := []*contextdv1.Message{user(strings.Repeat("lorem ipsum dolor sit amet ", 1500))}
	_, err = client.PrepareContext(ctx, &contextdv1.PrepareContextRequest{SessionId: "manual", Messages: huge})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "auto_compact is off") {
		t.Errorf("auto_compact off and over the window: %v", err)
	}
}
