package api

import (
	"context"
	"errors"
	"log/slog"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

// toStatus maps a domain error to a gRPC status, once, at the edge. Domain
// errors carry text our code wrote (which session, which field, what is too
// large); anything else may carry driver detail, so it is logged and becomes
// a bare Internal.
func toStatus(ctx context.Context, log *slog.Logger, err error) error {
	if err == nil {
		return nil
	}
	var invalid *chat.InvalidError
	switch {
	case errors.As(err, &invalid):
		st := status.New(codes.InvalidArgument, invalid.Error())
		br := &errdetails.BadRequest{}
		for _, v := range invalid.Violations {
			br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{Field: v.Field, Description: v.Description})
		}
		if withDetails, derr := st.WithDetails(br); derr == nil {
			return withDetails.Err()
		}
		return st.Err()
	case errors.Is(err, store.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, store.ErrAlreadyExists):
		return status.Error(codes.AlreadyExists, err.Error())
	case errors.Is(err, store.ErrVersionConflict):
		return status.Error(codes.Aborted, err.Error())
	case errors.Is(err, engine.ErrResourceExhausted):
		return status.Error(codes.ResourceExhausted, err.Error())
	case errors.Is(err, engine.ErrFailedPrecondition):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "request canceled")
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "deadline exceeded")
	case errors.Is(err, store.ErrUnavailable):
		// A database restart or failover: clients retry Unavailable.
		log.WarnContext(ctx, "database unavailable", "error", err)
		return status.Error(codes.Unavailable, "the database is unavailable; retry")
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	log.ErrorContext(ctx, "internal error", "error", err)
	return status.Error(codes.Internal, "internal error")
}
