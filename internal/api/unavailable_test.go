package api

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/contextd/contextd/internal/store"
)

// TestUnavailableStore: a store that cannot reach its database answers
// Unavailable, which clients retry, not Internal (the store test
// TestRestartIsUnavailable shows PostgreSQL's errors carry the sentinel).
func TestUnavailableStore(t *testing.T) {
	err := toStatus(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)),
		fmt.Errorf("prepare: %w", fmt.Errorf("%w: connection refused", store.ErrUnavailable)))
	if code := status.Code(err); code != codes.Unavailable {
		t.Fatalf("code %v, want Unavailable: %v", code, err)
	}
}
