package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
	"github.com/contextd/contextd/internal/pgtest"
)

func text(s string) *contextdv1.Part {
	return &contextdv1.Part{Kind: &contextdv1.Part_Text{Text: &contextdv1.TextPart{Text: s}}}
}

// TestConcurrentCompactAcrossReplicas: two server processes on one
// PostgreSQL receive Compact for the same session at the same moment; the
// advisory lock serializes them and the second finds nothing left to do.
func TestConcurrentCompactAcrossReplicas(t *testing.T) {
	bin := build(t, t.TempDir(), "contextd", "./cmd/server")
	url := "CONTEXTD_DATABASE_URL=" + pgtest.URL(t)
	a, b := startProc(t, bin, url), startProc(t, bin, url)
	ca, cb := contextdv1.NewContextServiceClient(a.conn), contextdv1.NewContextServiceClient(b.conn)
	ctx := t.Context()
	if _, err := ca.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: "shared", Model: "gpt-4"}); err != nil {
		t.Fatal(err)
	}
	msgs := []*contextdv1.Message{{Role: contextdv1.Role_ROLE_USER, Parts: []*contextdv1.Part{text("Fix the bug.")}}}
	for i := 0; i < 16; i++ {
		id := fmt.Sprintf("call_%d", i)
		msgs = append(msgs,
			&contextdv1.Message{Role: contextdv1.Role_ROLE_ASSISTANT, Parts: []*contextdv1.Part{{Kind: &contextdv1.Part_ToolCall{
				ToolCall: &contextdv1.ToolCallPart{Id: id, Name: "bash", ArgumentsJson: `{"command":"pytest"}`}}}}},
			&contextdv1.Message{Role: contextdv1.Role_ROLE_TOOL, Parts: []*contextdv1.Part{{Kind: &contextdv1.Part_ToolResult{
				ToolResult: &contextdv1.ToolResultPart{ToolCallId: id, Content: strings.Repeat("test output line\n", 80)}}}}})
	}
	if _, err := cb.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "shared", Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	results := make([]*contextdv1.CompactResponse, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, c := range []contextdv1.ContextServiceClient{ca, cb} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = c.Compact(ctx, &contextdv1.CompactRequest{SessionId: "shared"})
		}()
	}
	close(start)
	wg.Wait()
	compacted := 0
	for i := range results {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		if results[i].GetCompacted() {
			compacted++
		}
	}
	list, err := cb.ListCompactions(ctx, &contextdv1.ListCompactionsRequest{SessionId: "shared"})
	if err != nil {
		t.Fatal(err)
	}
	if compacted != 1 || len(list.GetCompactions()) != 1 {
		t.Fatalf("%d calls compacted, %d compactions stored; want exactly one", compacted, len(list.GetCompactions()))
	}
}
