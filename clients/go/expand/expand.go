// Package expand is the Go client's helper for contextd's contextd_expand
// tool (the policy option expose_expand_tool): it adds the tool
// PrepareContext returns to the tools sent to the model, and answers the
// model's calls of it with the ExpandToolCall RPC, so an agent loop over
// the generated client (gen/contextd/v1) answers them in a few lines.
package expand

import (
	"context"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// ToolName is the name of contextd's tool.
const ToolName = "contextd_expand"

// ModelTools returns the tools to send to the model: the session's own,
// then those PrepareContext added (prepared.Tools).
func ModelTools(session []*contextdv1.ToolDefinition, prepared *contextdv1.PrepareContextResponse) []*contextdv1.ToolDefinition {
	out := make([]*contextdv1.ToolDefinition, 0, len(session)+len(prepared.GetTools()))
	return append(append(out, session...), prepared.GetTools()...)
}

// Result is the answer to one contextd_expand call.
type Result struct {
	// Message is the tool result to append for the model: a tool message
	// answering the call.
	Message *contextdv1.Message
	// Stop is set when the round limit was hit: the result tells the model
	// to answer with what it has; offer it no further expand round.
	Stop bool
}

// Offered reports whether prepared offers contextd's tool: PrepareContext
// returns it in prepared.Tools only while the session's policy exposes it.
func Offered(prepared *contextdv1.PrepareContextResponse) bool {
	for _, t := range prepared.GetTools() {
		if t.GetName() == ToolName {
			return true
		}
	}
	return false
}

// Answer answers call when it is a call of contextd's tool: named
// contextd_expand while prepared (the PrepareContext response whose tools
// the model was sent) offers it. ok is false otherwise: the call is the
// caller's, a client tool's (one may be named contextd_expand while the
// option is off) or one of a tool the model was not offered. round is 1 for
// the first expand round of one model turn (every expand call of one model
// response is one round), 2 for the next; the server stops the model past
// its CONTEXTD_EXPAND_MAX_ROUNDS. A call the model got wrong is answered as
// an error result, not an error; err is the RPC's.
func Answer(ctx context.Context, client contextdv1.ContextServiceClient, sessionID string, prepared *contextdv1.PrepareContextResponse,
	call *contextdv1.ToolCallPart, round int32) (res Result, ok bool, err error) {
	if call.GetName() != ToolName || !Offered(prepared) {
		return Result{}, false, nil
	}
	a, err := client.ExpandToolCall(ctx, &contextdv1.ExpandToolCallRequest{SessionId: sessionID, Arguments: call.GetArgumentsJson(), Round: round})
	if err != nil {
		return Result{}, true, err
	}
	msg := &contextdv1.Message{Role: contextdv1.Role_ROLE_TOOL, Parts: []*contextdv1.Part{{Kind: &contextdv1.Part_ToolResult{
		ToolResult: &contextdv1.ToolResultPart{ToolCallId: call.GetId(), Content: a.GetContent(), IsError: a.GetIsError()}}}}}
	return Result{Message: msg, Stop: a.GetStop()}, true, nil
}
