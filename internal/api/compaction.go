package api

import (
	"context"

	"google.golang.org/protobuf/types/known/timestamppb"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

var tierFromProto = map[contextdv1.CompactionTier]compaction.Tier{
	contextdv1.CompactionTier_COMPACTION_TIER_PRUNE:       compaction.TierPrune,
	contextdv1.CompactionTier_COMPACTION_TIER_SUMMARIZE:   compaction.TierSummarize,
	contextdv1.CompactionTier_COMPACTION_TIER_DROP_MIDDLE: compaction.TierDropMiddle,
}

func compactionToProto(c *store.Compaction) *contextdv1.Compaction {
	if c == nil {
		return nil
	}
	out := &contextdv1.Compaction{Id: c.ID, Round: int32(c.Round), Tiers: c.Tiers, TokensBefore: c.TokensBefore,
		TokensAfter: c.TokensAfter, Summary: c.Summary, CreatedAt: timestamppb.New(c.CreatedAt),
		ExpiresAt: timestamppb.New(c.ExpiresAt)}
	if c.RevertedAt != nil {
		out.RevertedAt = timestamppb.New(*c.RevertedAt)
	}
	for _, it := range c.Items {
		out.Items = append(out.Items, &contextdv1.CompactionItem{Tier: it.Tier, NewMessageId: it.NewID,
			ReplacedMessageIds: it.Replaced, Reason: it.Reason, TokensBefore: it.TokensBefore, TokensAfter: it.TokensAfter})
	}
	return out
}

func compactionInfo(c *store.Compaction) *contextdv1.CompactionInfo {
	if c == nil {
		return nil
	}
	out := &contextdv1.CompactionInfo{Id: c.ID, Round: int32(c.Round), Tiers: c.Tiers, TokensBefore: c.TokensBefore,
		TokensAfter: c.TokensAfter, CreatedAt: timestamppb.New(c.CreatedAt)}
	if c.RevertedAt != nil {
		out.RevertedAt = timestamppb.New(*c.RevertedAt)
	}
	return out
}

func statusToProto(st engine.Status, event contextdv1.StatusEvent) *contextdv1.ContextStatus {
	return &contextdv1.ContextStatus{SessionId: st.SessionID, Version: st.Version, Event: event,
		Usage: usageToProto(st.Usage), Compacted: st.Compacted, LastCompaction: compactionInfo(st.LastCompaction),
		Warnings: st.Warnings, Time: timestamppb.New(st.Time), Ledger: ledgerToProto(st.Ledger)}
}

// PrepareContext implements contextd.v1.ContextService.
func (s *ContextService) PrepareContext(ctx context.Context, req *contextdv1.PrepareContextRequest) (*contextdv1.PrepareContextResponse, error) {
	msgs, err := messagesFromProto("messages", req.GetMessages())
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	res, err := s.engine.PrepareContext(ctx, tenantOf(ctx), req.GetSessionId(), engine.PrepareInput{
		Messages: msgs, IdempotencyKey: req.GetIdempotencyKey(), ExpectedVersion: req.ExpectedVersion, ViewToken: req.GetViewToken()})
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	event := contextdv1.StatusEvent_STATUS_EVENT_APPENDED
	if res.Status.Compacted {
		event = contextdv1.StatusEvent_STATUS_EVENT_COMPACTED
	}
	out := &contextdv1.PrepareContextResponse{Status: statusToProto(res.Status, event), ViewToken: res.ViewToken, Delta: res.Delta,
		Messages: make([]*contextdv1.Message, 0, len(res.Messages)), Cache: cacheHintsToProto(res.Cache), Tools: toolsToProto(res.Tools)}
	for i := range res.Messages {
		out.Messages = append(out.Messages, messageToProto(&res.Messages[i]))
	}
	return out, nil
}

// Compact implements contextd.v1.ContextService.
func (s *ContextService) Compact(ctx context.Context, req *contextdv1.CompactRequest) (*contextdv1.CompactResponse, error) {
	res, err := s.engine.Compact(ctx, tenantOf(ctx), req.GetSessionId(), engine.CompactInput{
		Tier: tierFromProto[req.GetTier()], DryRun: req.GetDryRun(), DryRunLLM: req.GetDryRunLlm(), Instructions: req.GetInstructions(), Target: req.Target})
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &contextdv1.CompactResponse{Compacted: res.Compacted, DryRun: res.DryRun, Compaction: compactionToProto(res.Compaction),
		Usage: usageToProto(res.Usage), Version: res.Version, Warnings: res.Warnings,
		NothingReason: nothingToProto[res.Nothing], NothingDetail: res.NothingDetail}, nil
}

var nothingToProto = map[engine.NothingReason]contextdv1.NothingToCompact{
	engine.NothingNone:             contextdv1.NothingToCompact_NOTHING_TO_COMPACT_UNSPECIFIED,
	engine.NothingBelowTarget:      contextdv1.NothingToCompact_NOTHING_TO_COMPACT_BELOW_TARGET,
	engine.NothingAllKept:          contextdv1.NothingToCompact_NOTHING_TO_COMPACT_ALL_KEPT,
	engine.NothingEmpty:            contextdv1.NothingToCompact_NOTHING_TO_COMPACT_EMPTY,
	engine.NothingSummarizerFailed: contextdv1.NothingToCompact_NOTHING_TO_COMPACT_SUMMARIZER_FAILED,
}

// RevertCompaction implements contextd.v1.ContextService.
func (s *ContextService) RevertCompaction(ctx context.Context, req *contextdv1.RevertCompactionRequest) (*contextdv1.RevertCompactionResponse, error) {
	v, err := s.engine.RevertCompaction(ctx, tenantOf(ctx), req.GetSessionId(), req.GetCompactionId())
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &contextdv1.RevertCompactionResponse{Session: sessionToProto(v)}, nil
}

// ListCompactions implements contextd.v1.ContextService.
func (s *ContextService) ListCompactions(ctx context.Context, req *contextdv1.ListCompactionsRequest) (*contextdv1.ListCompactionsResponse, error) {
	page, err := s.engine.ListCompactions(ctx, tenantOf(ctx), req.GetSessionId(),
		engine.Page{Size: int(req.GetPageSize()), Token: req.GetPageToken()})
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	out := &contextdv1.ListCompactionsResponse{NextPageToken: page.Next}
	for i := range page.Compactions {
		out.Compactions = append(out.Compactions, compactionToProto(&page.Compactions[i]))
	}
	return out, nil
}

// ExpandMessage implements contextd.v1.ContextService.
func (s *ContextService) ExpandMessage(ctx context.Context, req *contextdv1.ExpandMessageRequest) (*contextdv1.ExpandMessageResponse, error) {
	x, err := s.engine.ExpandMessage(ctx, tenantOf(ctx), req.GetSessionId(), req.GetMessageId(), req.GetPageToken())
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	out := &contextdv1.ExpandMessageResponse{Message: messageToProto(&x.Message), NextPageToken: x.Next}
	for i := range x.Originals {
		out.Originals = append(out.Originals, messageToProto(&x.Originals[i]))
	}
	return out, nil
}

// CreateHandoff implements contextd.v1.ContextService.
func (s *ContextService) CreateHandoff(ctx context.Context, req *contextdv1.CreateHandoffRequest) (*contextdv1.CreateHandoffResponse, error) {
	h, err := s.engine.CreateHandoff(ctx, tenantOf(ctx), req.GetSessionId(), engine.HandoffInput{
		NewSession: req.GetCreateSession(), NewSessionID: req.GetNewSessionId()})
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	out := &contextdv1.CreateHandoffResponse{Document: h.Document}
	if h.Session != nil {
		out.Session = sessionToProto(*h.Session)
	}
	return out, nil
}

// ReportUsage implements contextd.v1.ContextService.
func (s *ContextService) ReportUsage(ctx context.Context, req *contextdv1.ReportUsageRequest) (*contextdv1.ReportUsageResponse, error) {
	in := engine.ReportInput{InputTokens: req.GetInputTokens(), CacheReadTokens: req.GetCacheReadInputTokens(),
		CacheCreationTokens: req.GetCacheCreationInputTokens(), OutputTokens: req.GetOutputTokens(),
		IdempotencyKey: req.GetIdempotencyKey()}
	switch r := req.GetRequest().(type) {
	case *contextdv1.ReportUsageRequest_MessageCount:
		in.MessageCount = &r.MessageCount
	case *contextdv1.ReportUsageRequest_Version:
		in.Version = &r.Version
	case *contextdv1.ReportUsageRequest_ViewToken:
		in.ViewToken = r.ViewToken
	}
	u, err := s.engine.ReportUsage(ctx, tenantOf(ctx), req.GetSessionId(), in)
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &contextdv1.ReportUsageResponse{Usage: usageToProto(u)}, nil
}

// ExpandToolCall implements contextd.v1.ContextService.
func (s *ContextService) ExpandToolCall(ctx context.Context, req *contextdv1.ExpandToolCallRequest) (*contextdv1.ExpandToolCallResponse, error) {
	a, err := s.engine.ExpandToolCall(ctx, tenantOf(ctx), req.GetSessionId(), req.GetArguments(), int(req.GetRound()))
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &contextdv1.ExpandToolCallResponse{Content: a.Content, IsError: a.IsError, Stop: a.Stop}, nil
}
