package api

import (
	"context"

	"google.golang.org/protobuf/types/known/timestamppb"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/engine"
)

// tenantOf returns the caller's tenant, set by the auth interceptor (the
// default tenant when authentication is off).
func tenantOf(ctx context.Context) string { return auth.TenantFrom(ctx) }

func sessionToProto(v engine.SessionView) *contextdv1.Session {
	out := &contextdv1.Session{
		Id: v.ID, Model: v.Model, SystemPrompt: v.SystemPrompt, Policy: overridesToProto(v.Policy),
		Labels: v.Labels, Version: v.Version, MessageCount: v.ActiveCount, LogCount: v.LogCount,
		Usage: usageToProto(v.Usage), CreatedAt: timestamppb.New(v.CreatedAt), UpdatedAt: timestamppb.New(v.UpdatedAt),
		Ledger: ledgerToProto(v.Ledger), LastCompaction: compactionInfo(v.LastCompaction), Warnings: v.Warnings,
		Tools: toolsToProto(v.Tools),
	}
	return out
}

// CreateSession implements contextd.v1.ContextService.
func (s *ContextService) CreateSession(ctx context.Context, req *contextdv1.CreateSessionRequest) (*contextdv1.CreateSessionResponse, error) {
	v, err := s.engine.CreateSession(ctx, tenantOf(ctx), engine.NewSession{
		ID: req.GetId(), Model: req.GetModel(), System: req.GetSystemPrompt(), Tools: toolsFromProto(req.GetTools()),
		Policy: policyFromProto(req.GetPolicy()), Labels: req.GetLabels(),
	})
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &contextdv1.CreateSessionResponse{Session: sessionToProto(v)}, nil
}

// GetSession implements contextd.v1.ContextService.
func (s *ContextService) GetSession(ctx context.Context, req *contextdv1.GetSessionRequest) (*contextdv1.GetSessionResponse, error) {
	v, err := s.engine.GetSession(ctx, tenantOf(ctx), req.GetSessionId())
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &contextdv1.GetSessionResponse{Session: sessionToProto(v)}, nil
}

// ListSessions implements contextd.v1.ContextService.
func (s *ContextService) ListSessions(ctx context.Context, req *contextdv1.ListSessionsRequest) (*contextdv1.ListSessionsResponse, error) {
	views, next, err := s.engine.ListSessions(ctx, tenantOf(ctx), req.GetLabels(),
		engine.Page{Size: int(req.GetPageSize()), Token: req.GetPageToken()})
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	out := &contextdv1.ListSessionsResponse{NextPageToken: next}
	for _, v := range views {
		out.Sessions = append(out.Sessions, sessionToProto(v))
	}
	return out, nil
}

// DeleteSession implements contextd.v1.ContextService.
func (s *ContextService) DeleteSession(ctx context.Context, req *contextdv1.DeleteSessionRequest) (*contextdv1.DeleteSessionResponse, error) {
	if err := s.engine.DeleteSession(ctx, tenantOf(ctx), req.GetSessionId()); err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &contextdv1.DeleteSessionResponse{}, nil
}

// AppendMessages implements contextd.v1.ContextService.
func (s *ContextService) AppendMessages(ctx context.Context, req *contextdv1.AppendMessagesRequest) (*contextdv1.AppendMessagesResponse, error) {
	msgs, err := messagesFromProto("messages", req.GetMessages())
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	res, err := s.engine.AppendMessages(ctx, tenantOf(ctx), req.GetSessionId(), engine.AppendInput{
		Messages: msgs, ExpectedVersion: req.ExpectedVersion, IdempotencyKey: req.GetIdempotencyKey(),
		IncludeContent: req.GetIncludeContent(),
	})
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	out := &contextdv1.AppendMessagesResponse{Version: res.Version, Usage: usageToProto(res.Usage), Warnings: res.Warnings}
	for i := range res.Messages {
		m := &res.Messages[i]
		if !req.GetIncludeContent() {
			ref := engine.StoredRef(*m)
			m = &ref
		}
		out.Messages = append(out.Messages, messageToProto(m))
	}
	return out, nil
}

// GetMessages implements contextd.v1.ContextService.
func (s *ContextService) GetMessages(ctx context.Context, req *contextdv1.GetMessagesRequest) (*contextdv1.GetMessagesResponse, error) {
	view := engine.ViewActive
	if req.GetView() == contextdv1.MessageView_MESSAGE_VIEW_LOG {
		view = engine.ViewLog
	}
	page, err := s.engine.GetMessages(ctx, tenantOf(ctx), req.GetSessionId(), view,
		engine.Page{Size: int(req.GetPageSize()), Token: req.GetPageToken()})
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	out := &contextdv1.GetMessagesResponse{NextPageToken: page.Next, Version: page.Version}
	for i := range page.Messages {
		out.Messages = append(out.Messages, messageToProto(&page.Messages[i]))
	}
	return out, nil
}
