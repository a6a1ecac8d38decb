package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/contextd/contextd/internal/store"
)

// A database that cannot be reached is the provider's 503 with a
// Retry-After, which SDKs retry: not a 500 logged as an internal error.
func TestUnavailableStoreIs503(t *testing.T) {
	g := &Gateway{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, shape := range []wireShape{shapeOpenAI, shapeAnthropic} {
		w := httptest.NewRecorder()
		g.writeDomainError(context.Background(), w, shape, fmt.Errorf("append: %w: %w", store.ErrUnavailable, io.ErrUnexpectedEOF))
		if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
			t.Errorf("shape %v: %d, Retry-After %q; want 503 with Retry-After", shape, w.Code, w.Header().Get("Retry-After"))
		}
	}
}
