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

// TestErrorsDoNotNameStrangersSessions: an error about a session the
// request found by its history (a stranger's, not named) reaches the client
// without that session's id, still classified as what it wraps; one about
// the caller's own session names it.
func TestErrorsDoNotNameStrangersSessions(t *testing.T) {
	g := &Gateway{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	conflict := fmt.Errorf("session %q is at version 5, not the expected 4: %w", "gw-stranger", store.ErrVersionConflict)
	w := httptest.NewRecorder()
	g.writeDomainError(context.Background(), w, shapeOpenAI, hideSession(conflict, resolved{id: "gw-stranger"}))
	if w.Code != http.StatusConflict || strings.Contains(w.Body.String(), "gw-stranger") {
		t.Errorf("a stranger's session: %d %s", w.Code, w.Body)
	}
	sig := signal{id: "mine"}
	own := fmt.Errorf("session %q: %w", "mine~abc", store.ErrVersionConflict)
	w = httptest.NewRecorder()
	g.writeDomainError(context.Background(), w, shapeOpenAI, hideSession(own, resolved{id: "mine~abc", named: sig.owns("mine~abc")}))
	if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "mine~abc") {
		t.Errorf("the caller's own session: %d %s", w.Code, w.Body)
	}
}
