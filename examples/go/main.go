// Command example is an agent loop around contextd in Go that places
// Anthropic prompt-cache marks from PrepareContext's cache hints.
//
// Before every model call it sends what happened since the last one
// (PrepareContext), builds an Anthropic Messages API request from the
// messages it gets back, with a cache_control mark on each recommended
// breakpoint (after tools and system prompt, at the end of the summary, at
// the end of the prefix the previous request shares, at the end of the
// request), and after the call reports the provider's usage block
// (ReportUsage), which feeds the session's cost ledger.
//
//	go run ./examples/go localhost:50051
//
// The model is a scripted stand-in that prints the request's marks; send
// the request body with your HTTP client or the Anthropic SDK instead.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

func main() {
	addr := "localhost:50051"
	if len(os.Args) > 1 {
		addr = os.Args[1]
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	client := contextdv1.NewContextServiceClient(conn)
	ctx := context.Background()
	system := "You are a coding agent."
	sess, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Model: "claude-sonnet-4-5", SystemPrompt: system})
	if err != nil {
		log.Fatal(err)
	}
	id := sess.GetSession().GetId()
	pending := []*contextdv1.Message{text(contextdv1.Role_ROLE_USER, "Fix the failing test in src/app.py.")}
	for step := range 3 {
		prep, err := client.PrepareContext(ctx, &contextdv1.PrepareContextRequest{SessionId: id, Messages: pending})
		if err != nil {
			log.Fatal(err)
		}
		body := AnthropicRequest("claude-sonnet-4-5", system, prep.GetMessages(), prep.GetCache())
		out, _ := json.Marshal(body)
		h := prep.GetCache()
		fmt.Printf("step %d: %d messages, %d of %d tokens cacheable from the previous request, %d marks, %d bytes\n",
			step, len(prep.GetMessages()), h.GetStablePrefixTokens(), h.GetRequestTokens(), len(h.GetBreakpoints()), len(out))
		// The model's answer and its usage block (scripted here).
		answer := text(contextdv1.Role_ROLE_ASSISTANT, fmt.Sprintf("Step %d: I looked at src/app.py.", step))
		if _, err := client.ReportUsage(ctx, &contextdv1.ReportUsageRequest{SessionId: id,
			InputTokens: 12, CacheReadInputTokens: h.GetStablePrefixTokens(),
			CacheCreationInputTokens: max(h.GetRequestTokens()-h.GetStablePrefixTokens()-12, 1), OutputTokens: 20,
			Request: &contextdv1.ReportUsageRequest_ViewToken{ViewToken: prep.GetViewToken()}}); err != nil {
			log.Fatal(err)
		}
		pending = []*contextdv1.Message{answer, text(contextdv1.Role_ROLE_USER, "Go on.")}
	}
	got, err := client.GetSession(ctx, &contextdv1.GetSessionRequest{SessionId: id})
	if err != nil {
		log.Fatal(err)
	}
	l := got.GetSession().GetLedger()
	fmt.Printf("ledger: %d calls, cache hit %.1f%%, $%.4f\n", l.GetCalls().GetCalls(), 100*l.GetCacheHitRate(), l.GetTotalCostUsd())
}

func text(role contextdv1.Role, s string) *contextdv1.Message {
	return &contextdv1.Message{Role: role, Parts: []*contextdv1.Part{{Kind: &contextdv1.Part_Text{Text: &contextdv1.TextPart{Text: s}}}}}
}

// AnthropicRequest is the body of an Anthropic Messages API request for the
// view, with a cache_control mark on the last block of every recommended
// breakpoint (-1: the system prompt). Tool results become tool_result
// blocks of a user turn, as Anthropic expects.
func AnthropicRequest(model, system string, msgs []*contextdv1.Message, hints *contextdv1.CacheHints) map[string]any {
	marked := map[int64]bool{}
	for _, b := range hints.GetBreakpoints() {
		marked[b.GetMessageIndex()] = true
	}
	ephemeral := map[string]any{"type": "ephemeral"}
	sys := map[string]any{"type": "text", "text": system}
	if marked[-1] {
		sys["cache_control"] = ephemeral
	}
	var turns []map[string]any
	for i, m := range msgs {
		role := "user"
		if m.GetRole() == contextdv1.Role_ROLE_ASSISTANT {
			role = "assistant"
		}
		var blocks []map[string]any
		for _, p := range m.GetParts() {
			switch {
			case p.GetText() != nil:
				blocks = append(blocks, map[string]any{"type": "text", "text": p.GetText().GetText()})
			case p.GetToolCall() != nil:
				var input any = map[string]any{}
				_ = json.Unmarshal([]byte(p.GetToolCall().GetArgumentsJson()), &input)
				blocks = append(blocks, map[string]any{"type": "tool_use", "id": p.GetToolCall().GetId(), "name": p.GetToolCall().GetName(), "input": input})
			case p.GetToolResult() != nil:
				blocks = append(blocks, map[string]any{"type": "tool_result", "tool_use_id": p.GetToolResult().GetToolCallId(),
					"content": p.GetToolResult().GetContent(), "is_error": p.GetToolResult().GetIsError()})
			}
		}
		if len(blocks) > 0 && marked[int64(i)] {
			blocks[len(blocks)-1]["cache_control"] = ephemeral
		}
		if n := len(turns); n > 0 && turns[n-1]["role"] == role { // merge consecutive turns of one role
			turns[n-1]["content"] = append(turns[n-1]["content"].([]map[string]any), blocks...)
			continue
		}
		turns = append(turns, map[string]any{"role": role, "content": blocks})
	}
	return map[string]any{"model": model, "max_tokens": 4096, "system": []map[string]any{sys}, "messages": turns}
}
