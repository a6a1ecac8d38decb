package api

import (
	"context"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
	"github.com/contextd/contextd/internal/engine"
)

// UpdateSession implements contextd.v1.ContextService.
func (s *ContextService) UpdateSession(ctx context.Context, req *contextdv1.UpdateSessionRequest) (*contextdv1.UpdateSessionResponse, error) {
	v, err := s.engine.UpdateSession(ctx, tenantOf(ctx), req.GetSessionId(), engine.SessionUpdate{
		Mask: req.GetUpdateMask().GetPaths(), Model: req.GetModel(), System: req.GetSystemPrompt(),
		Tools: toolsFromProto(req.GetTools()), Policy: policyFromProto(req.GetPolicy()), Labels: req.GetLabels(),
		ExpectedVersion: req.ExpectedVersion,
	})
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &contextdv1.UpdateSessionResponse{Session: sessionToProto(v)}, nil
}

// ClearMessages implements contextd.v1.ContextService.
func (s *ContextService) ClearMessages(ctx context.Context, req *contextdv1.ClearMessagesRequest) (*contextdv1.ClearMessagesResponse, error) {
	res, err := s.engine.ClearMessages(ctx, tenantOf(ctx), req.GetSessionId(), req.GetKeepFirstUserMessage(), req.ExpectedVersion)
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &contextdv1.ClearMessagesResponse{Session: sessionToProto(res.Session), Compaction: compactionToProto(res.Compaction)}, nil
}
