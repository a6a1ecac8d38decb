package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/store"
)

// TestUnavailableStore: a store that cannot reach its database is a 503
// at the gateway (the SDKs retry it), as the gRPC API answers Unavailable,
// in each provider's error shape; it was a 500 "internal error" logged as
// one.
func TestUnavailableStore(t *testing.T) {
	g := &Gateway{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	err := fmt.Errorf("append: %w", fmt.Errorf("%w: connection refused", store.ErrUnavailable))
	for _, shape := range []wireShape{shapeOpenAI, shapeAnthropic} {
		w := httptest.NewRecorder()
		g.writeDomainError(context.Background(), w, shape, err)
		if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "database is unavailable") || w.Header().Get("Retry-After") == "" {
			t.Errorf("shape %d: %d %s (Retry-After %q), want 503 naming the database, with Retry-After", shape, w.Code, w.Body, w.Header().Get("Retry-After"))
		}
	}
}
