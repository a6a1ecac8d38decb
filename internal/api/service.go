// Package api is where requests enter: the gRPC handlers of contextd.v1. It
// converts protobuf to domain types (convert.go), calls the engine, and maps
// errors to gRPC status codes (errors.go). Protobuf types stop here.
package api

import (
	"context"
	"log/slog"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/watch"
)

// ContextService implements contextd.v1.ContextService.
type ContextService struct {
	contextdv1.UnimplementedContextServiceServer
	engine *engine.Engine
	hub    *watch.Hub
	log    *slog.Logger
}

// NewContextService returns the handlers over an engine and the watch hub.
func NewContextService(e *engine.Engine, hub *watch.Hub, log *slog.Logger) *ContextService {
	return &ContextService{engine: e, hub: hub, log: log}
}

// CountTokens implements contextd.v1.ContextService.
func (s *ContextService) CountTokens(ctx context.Context, req *contextdv1.CountTokensRequest) (*contextdv1.CountTokensResponse, error) {
	msgs, err := messagesFromProto("messages", req.GetMessages())
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	res, err := s.engine.CountTokens(ctx, engine.CountInput{
		Model: req.GetModel(), Encoding: req.GetEncoding(), Text: req.GetText(),
		System: req.GetSystemPrompt(), Tools: toolsFromProto(req.GetTools()), Messages: msgs,
	})
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return countToProto(res), nil
}

// ListModels implements contextd.v1.ContextService.
func (s *ContextService) ListModels(context.Context, *contextdv1.ListModelsRequest) (*contextdv1.ListModelsResponse, error) {
	models, def := s.engine.Models()
	out := &contextdv1.ListModelsResponse{DefaultModel: modelToProto(def)}
	for _, m := range models {
		out.Models = append(out.Models, modelToProto(m))
	}
	return out, nil
}

// GetContextUsage implements contextd.v1.ContextService.
func (s *ContextService) GetContextUsage(ctx context.Context, req *contextdv1.GetContextUsageRequest) (*contextdv1.GetContextUsageResponse, error) {
	if id := req.GetSessionId(); id != "" {
		u, err := s.engine.SessionUsage(ctx, tenantOf(ctx), id)
		if err != nil {
			return nil, toStatus(ctx, s.log, err)
		}
		return &contextdv1.GetContextUsageResponse{Usage: usageToProto(u)}, nil
	}
	in := req.GetInline()
	msgs, err := messagesFromProto("inline.messages", in.GetMessages())
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	u, err := s.engine.InlineUsage(ctx, tenantOf(ctx), engine.InlineContext{
		Model: in.GetModel(), System: in.GetSystemPrompt(), Tools: toolsFromProto(in.GetTools()),
		Messages: msgs, Policy: policyFromProto(in.GetPolicy()),
	})
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &contextdv1.GetContextUsageResponse{Usage: usageToProto(u)}, nil
}
