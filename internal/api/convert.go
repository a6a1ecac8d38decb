package api

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/types/known/timestamppb"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/tokens"
)

// This file is the one place where protobuf and domain types meet.

var roleFromProto = map[contextdv1.Role]chat.Role{
	contextdv1.Role_ROLE_SYSTEM:    chat.RoleSystem,
	contextdv1.Role_ROLE_USER:      chat.RoleUser,
	contextdv1.Role_ROLE_ASSISTANT: chat.RoleAssistant,
	contextdv1.Role_ROLE_TOOL:      chat.RoleTool,
}

var roleToProto = invert(roleFromProto)

func invert[K, V comparable](m map[K]V) map[V]K {
	out := make(map[V]K, len(m))
	for k, v := range m {
		out[v] = k
	}
	return out
}

var kindToProto = map[chat.Kind]contextdv1.MessageKind{
	chat.KindNormal:      contextdv1.MessageKind_MESSAGE_KIND_NORMAL,
	chat.KindSummary:     contextdv1.MessageKind_MESSAGE_KIND_SUMMARY,
	chat.KindPlaceholder: contextdv1.MessageKind_MESSAGE_KIND_PLACEHOLDER,
}

// reservedMetadata are the metadata keys contextd sets on messages it
// makes and reads back as its own, which an API client may not set (why,
// for the error): the gateway's marks of what a provider's compaction
// dropped, which count nothing (chat/providercompaction.go) — set by a
// client, its whole session would count 0 tokens, never be compacted and
// pass the view's bounds; compaction's marks of a stand-in
// (compaction/scaffoldprune.go) — kept by the placeholder of a client's
// message, they made it pass as the stand-in of the original task or of
// the latest user message, which Validate then checked against that one,
// and its parts as what the person typed; the mark of a client's version
// of a message (engine.EditOfMetadata), which the engine reads as "stands
// for log message X" when it compacts; a message's place in a client's
// history (store.HistoryMetadata), indexed at append, so set by a client
// it planted a history chain the gateway could match a stranger's
// conversation into; the mark of a result the server recorded for an
// interrupted tool call (engine.InterruptedMetadata), which
// AppendMessages answers as the server's and the gateway reads as no
// message of the client's; and every key of the gateway's own
// (chat.MetaGatewayPrefix) — contextd.gateway.raw is the provider's JSON
// of the message, which the gateway sends upstream in its place while it
// counts as its parts, so set by a client it went upstream uncounted.
// Refused, never stripped: the client learns its message is not stored as
// sent. Other keys, contextd.* ones included (contextd.carried is a
// runtime's to set), are the client's.
var reservedMetadata = []struct{ key, why string }{
	{chat.MetaProviderDropped, "is set by the gateway only (what a provider's compaction dropped counts nothing)"},
	{chat.MetaProviderCompaction, "is set by the gateway only (what a provider's compaction dropped counts nothing)"},
	{compaction.ScaffoldOfKey, "is set by compaction only (it marks the stand-in of a message whose scaffolding was pruned)"},
	{compaction.ScaffoldNotesKey, "is set by compaction only (it marks a stand-in's notes)"},
	{engine.EditOfMetadata, "is set by contextd only (it marks a client's version of a log message, which stands for that message)"},
	{store.HistoryMetadata, "is set by the gateway only (it places a message in a client's history, which the gateway matches conversations by)"},
	{engine.InterruptedMetadata, "is set by contextd only (it marks the result contextd recorded for an interrupted tool call)"},
}

// reservedKey is the reserved key of metadata (the first in order of the
// gateway's), and why it is, or "".
func reservedKey(metadata map[string]string) (key, why string) {
	for _, r := range reservedMetadata {
		if _, ok := metadata[r.key]; ok {
			return r.key, r.why
		}
	}
	for k := range metadata { // at most 64 (protovalidate)
		if strings.HasPrefix(k, chat.MetaGatewayPrefix) && (key == "" || k < key) {
			key = k
		}
	}
	if key != "" {
		why = "is set by the gateway only (its keys mark what the gateway stored of a provider's messages; its copy of a message is sent upstream counted as the message's parts)"
	}
	return key, why
}

// messagesFromProto converts request messages. Requests have passed
// protovalidate; what it cannot express is reported as field violations.
func messagesFromProto(field string, in []*contextdv1.Message) ([]chat.Message, error) {
	out := make([]chat.Message, len(in))
	for i, m := range in {
		role, ok := roleFromProto[m.GetRole()]
		if !ok {
			return nil, chat.Invalid(fmt.Sprintf("%s[%d].role", field, i), "must be one of ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT, ROLE_TOOL")
		}
		if key, why := reservedKey(m.GetMetadata()); key != "" {
			return nil, chat.Invalid(fmt.Sprintf("%s[%d].metadata[%s]", field, i, key), "%s", why)
		}
		msg := chat.Message{
			Role: role, Name: m.GetName(), Pinned: m.GetPinned(), Kind: chat.KindNormal,
			Metadata: m.GetMetadata(), Parts: make([]chat.Part, len(m.GetParts())),
		}
		for j, p := range m.GetParts() {
			part, err := partFromProto(p)
			if err != nil {
				return nil, chat.Invalid(fmt.Sprintf("%s[%d].parts[%d]", field, i, j), "%v", err)
			}
			msg.Parts[j] = part
		}
		out[i] = msg
	}
	return out, nil
}

func partFromProto(p *contextdv1.Part) (chat.Part, error) {
	switch k := p.GetKind().(type) {
	case *contextdv1.Part_Text:
		return chat.Part{Type: chat.PartText, Text: k.Text.GetText()}, nil
	case *contextdv1.Part_ToolCall:
		return chat.Part{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{
			ID: k.ToolCall.GetId(), Name: k.ToolCall.GetName(), Arguments: k.ToolCall.GetArgumentsJson(),
		}}, nil
	case *contextdv1.Part_ToolResult:
		return chat.Part{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{
			ToolCallID: k.ToolResult.GetToolCallId(), Content: k.ToolResult.GetContent(), IsError: k.ToolResult.GetIsError(),
		}}, nil
	case *contextdv1.Part_Image:
		return chat.Part{Type: chat.PartImage, Image: &chat.Image{
			MediaType: k.Image.GetMediaType(), Width: int(k.Image.GetWidth()), Height: int(k.Image.GetHeight()), Detail: k.Image.GetDetail(),
		}}, nil
	default:
		return chat.Part{}, fmt.Errorf("one of text, tool_call, tool_result or image is required")
	}
}

// messageToProto converts a stored message for a response.
func messageToProto(m *chat.Message) *contextdv1.Message {
	out := &contextdv1.Message{
		Id: m.ID, Position: m.Position, Role: roleToProto[m.Role], Name: m.Name, Pinned: m.Pinned,
		Kind: kindToProto[m.Kind], Tokens: m.Tokens, Metadata: m.Metadata,
	}
	if !m.CreatedAt.IsZero() {
		out.CreatedAt = timestamppb.New(m.CreatedAt)
	}
	for _, p := range m.Parts {
		out.Parts = append(out.Parts, partToProto(p))
	}
	return out
}

func partToProto(p chat.Part) *contextdv1.Part {
	switch p.Type {
	case chat.PartToolCall:
		return &contextdv1.Part{Kind: &contextdv1.Part_ToolCall{ToolCall: &contextdv1.ToolCallPart{
			Id: p.ToolCall.ID, Name: p.ToolCall.Name, ArgumentsJson: p.ToolCall.Arguments}}}
	case chat.PartToolResult:
		return &contextdv1.Part{Kind: &contextdv1.Part_ToolResult{ToolResult: &contextdv1.ToolResultPart{
			ToolCallId: p.ToolResult.ToolCallID, Content: p.ToolResult.Content, IsError: p.ToolResult.IsError}}}
	case chat.PartImage:
		return &contextdv1.Part{Kind: &contextdv1.Part_Image{Image: &contextdv1.ImagePart{
			MediaType: p.Image.MediaType, Width: int32(p.Image.Width), Height: int32(p.Image.Height), Detail: p.Image.Detail}}}
	default:
		return &contextdv1.Part{Kind: &contextdv1.Part_Text{Text: &contextdv1.TextPart{Text: p.Text}}}
	}
}

func toolsFromProto(in []*contextdv1.ToolDefinition) []chat.Tool {
	out := make([]chat.Tool, len(in))
	for i, t := range in {
		out[i] = chat.Tool{Name: t.GetName(), Description: t.GetDescription(), Parameters: t.GetParametersJson()}
	}
	return out
}

func toolsToProto(in []chat.Tool) []*contextdv1.ToolDefinition {
	var out []*contextdv1.ToolDefinition
	for _, t := range in {
		out = append(out, &contextdv1.ToolDefinition{Name: t.Name, Description: t.Description, ParametersJson: t.Parameters})
	}
	return out
}

func policyFromProto(p *contextdv1.CompactionPolicy) compaction.Overrides {
	var o compaction.Overrides
	if p == nil {
		return o
	}
	o.WarningThreshold = p.WarningThreshold
	o.CriticalThreshold = p.CriticalThreshold
	o.EmergencyThreshold = p.EmergencyThreshold
	o.Target = p.Target
	o.KeepRecentTokens = p.KeepRecentTokens
	o.AutoCompact = p.AutoCompact
	o.ReservedOutputTokens = p.ReservedOutputTokens
	o.KeepRecentMessages = intPtr(p.KeepRecentMessages)
	o.ProtectRecentToolResults = intPtr(p.ProtectRecentToolResults)
	o.SummaryMaxTokens = intPtr(p.SummaryMaxTokens)
	o.Summarizer = p.Summarizer
	o.CachePaybackCalls = intPtr(p.CachePaybackCalls)
	o.CacheTarget = p.CacheTarget
	o.ExposeExpandTool = p.ExposeExpandTool
	o.KeepHumanTokens = p.KeepHumanTokens
	return o
}

func intPtr(p *int32) *int {
	if p == nil {
		return nil
	}
	v := int(*p)
	return &v
}

// overridesToProto returns a stored policy as given (unset fields unset).
func overridesToProto(o compaction.Overrides) *contextdv1.CompactionPolicy {
	i32 := func(v *int) *int32 {
		if v == nil {
			return nil
		}
		x := int32(*v)
		return &x
	}
	return &contextdv1.CompactionPolicy{
		WarningThreshold: o.WarningThreshold, CriticalThreshold: o.CriticalThreshold,
		EmergencyThreshold: o.EmergencyThreshold, Target: o.Target, KeepRecentTokens: o.KeepRecentTokens,
		KeepRecentMessages: i32(o.KeepRecentMessages), ProtectRecentToolResults: i32(o.ProtectRecentToolResults),
		AutoCompact: o.AutoCompact, ReservedOutputTokens: o.ReservedOutputTokens, SummaryMaxTokens: i32(o.SummaryMaxTokens),
		Summarizer: o.Summarizer, CachePaybackCalls: i32(o.CachePaybackCalls), CacheTarget: o.CacheTarget,
		ExposeExpandTool: o.ExposeExpandTool, KeepHumanTokens: o.KeepHumanTokens,
	}
}

func policyToProto(p compaction.Policy) *contextdv1.CompactionPolicy {
	i32 := func(v int) *int32 { x := int32(v); return &x }
	return &contextdv1.CompactionPolicy{
		WarningThreshold:         &p.WarningThreshold,
		CriticalThreshold:        &p.CriticalThreshold,
		EmergencyThreshold:       &p.EmergencyThreshold,
		Target:                   &p.Target,
		KeepRecentTokens:         &p.KeepRecentTokens,
		KeepRecentMessages:       i32(p.KeepRecentMessages),
		ProtectRecentToolResults: i32(p.ProtectRecentToolResults),
		AutoCompact:              &p.AutoCompact,
		ReservedOutputTokens:     &p.ReservedOutputTokens,
		SummaryMaxTokens:         i32(p.SummaryMaxTokens),
		Summarizer:               &p.Summarizer,
		CachePaybackCalls:        i32(p.CachePaybackCalls),
		CacheTarget:              &p.CacheTarget,
		ExposeExpandTool:         &p.ExposeExpandTool,
		KeepHumanTokens:          &p.KeepHumanTokens,
	}
}

var levelToProto = map[compaction.Level]contextdv1.ContextLevel{
	compaction.LevelOK:        contextdv1.ContextLevel_CONTEXT_LEVEL_OK,
	compaction.LevelCompact:   contextdv1.ContextLevel_CONTEXT_LEVEL_COMPACT,
	compaction.LevelSummarize: contextdv1.ContextLevel_CONTEXT_LEVEL_SUMMARIZE,
	compaction.LevelHandoff:   contextdv1.ContextLevel_CONTEXT_LEVEL_HANDOFF,
}

var sourceToProto = map[engine.Source]contextdv1.EstimateSource{
	engine.SourceEstimated:  contextdv1.EstimateSource_ESTIMATE_SOURCE_ESTIMATED,
	engine.SourceCalibrated: contextdv1.EstimateSource_ESTIMATE_SOURCE_CALIBRATED,
	engine.SourceAnchored:   contextdv1.EstimateSource_ESTIMATE_SOURCE_ANCHORED,
	engine.SourceProvider:   contextdv1.EstimateSource_ESTIMATE_SOURCE_PROVIDER,
}

func usageToProto(u engine.Usage) *contextdv1.ContextUsage {
	return &contextdv1.ContextUsage{
		Model: u.Model, ModelKnown: u.ModelKnown, Encoding: u.Encoding, Exact: u.Exact,
		ContextWindow: u.ContextWindow, SystemTokens: u.SystemTokens, ToolsTokens: u.ToolsTokens,
		MessagesTokens: u.MessagesTokens, MessageCount: u.MessageCount, ReservedOutputTokens: u.ReservedOutput,
		UsedTokens: u.Used, FreeTokens: u.Free, OverTokens: u.Over, PercentUsed: u.PercentUsed,
		Thresholds: policyToProto(u.Policy), Level: levelToProto[u.Level], WillCompact: u.WillCompact,
		Recommendation: u.Recommendation, EstimateSource: sourceToProto[u.Source],
		ExpectedError: u.ExpectedError, Warnings: u.Warnings,
	}
}

func modelToProto(m tokens.Model) *contextdv1.ModelInfo {
	return &contextdv1.ModelInfo{
		Name: m.Name, Aliases: m.Aliases, Provider: m.Provider, ContextWindow: m.ContextWindow,
		MaxOutputTokens: m.MaxOutputTokens, Encoding: m.Encoding, Exact: m.Exact, ExpectedError: m.ExpectedError,
		Pricing: pricingToProto(m.Pricing),
	}
}

func countToProto(r engine.CountResult) *contextdv1.CountTokensResponse {
	out := &contextdv1.CountTokensResponse{
		TotalTokens: r.Total, Encoding: r.Encoding, Model: r.Model, Exact: r.Exact,
		SystemTokens: r.Breakdown.System, ToolsTokens: r.Breakdown.Tools, MessagesTokens: r.Breakdown.Messages,
		Warnings: r.Warnings,
	}
	for i, mc := range r.Breakdown.PerMsg {
		m := &contextdv1.MessageCount{Index: int32(i), Tokens: mc.Tokens, FramingTokens: mc.Framing}
		for j, pc := range mc.Parts {
			m.Parts = append(m.Parts, &contextdv1.PartCount{Index: int32(j), Kind: string(pc.Type), Tokens: pc.Tokens})
		}
		out.Messages = append(out.Messages, m)
	}
	for _, tc := range r.Breakdown.PerTool {
		out.Tools = append(out.Tools, &contextdv1.ToolCount{Name: tc.Name, Tokens: tc.Tokens})
	}
	return out
}
