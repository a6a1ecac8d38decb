package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

// TestErrorsClassifiedBySentinel: writeDomainError picks the status and
// the provider's error type by the sentinel an error wraps (errors.Is),
// never by its text. An error that wraps the sentinel under unrelated
// text (as hideSession's does) maps as the sentinel does; an error that
// only says the sentinel's words, wrapping nothing, is contextd's
// internal error. Matching English text instead would get both wrong.
func TestErrorsClassifiedBySentinel(t *testing.T) {
	g := New(Config{})
	cases := []struct {
		sentinel error
		// wrapped as the engine wraps it (several sentinels at once)
		wrapped        error
		status         int
		openAI         string // error.code (type when the kind has no code)
		anthropic      string // error.type
		wantRetryAfter bool
	}{
		{store.ErrNotFound, store.ErrNotFound, 404, "not_found", "not_found_error", false},
		{store.ErrVersionConflict, store.ErrVersionConflict, 409, "conflict", "invalid_request_error", false},
		{store.ErrAlreadyExists, store.ErrAlreadyExists, 409, "conflict", "invalid_request_error", false},
		{engine.ErrSessionLimit, fmt.Errorf("%w (%w)", engine.ErrSessionLimit, engine.ErrResourceExhausted), 403, "contextd_session_limit", "permission_error", false},
		{engine.ErrResourceExhausted, engine.ErrResourceExhausted, 429, "rate_limit_exceeded", "rate_limit_error", false},
		{compaction.ErrTooLarge, compaction.ErrTooLarge, 400, "context_length_exceeded", "invalid_request_error", false},
		{engine.ErrOverWindow, fmt.Errorf("%w (%w)", engine.ErrOverWindow, engine.ErrFailedPrecondition), 400, "context_length_exceeded", "invalid_request_error", false},
		{engine.ErrFailedPrecondition, engine.ErrFailedPrecondition, 400, "invalid_request_error", "invalid_request_error", false},
		{store.ErrUnavailable, store.ErrUnavailable, 503, "server_error", "api_error", true},
		{context.DeadlineExceeded, context.DeadlineExceeded, 504, "upstream_error", "api_error", false},
		{context.Canceled, context.Canceled, 499, "invalid_request_error", "invalid_request_error", false},
	}
	for _, tc := range cases {
		// The sentinel under other words: classified by what it wraps.
		disguised := &hiddenSession{err: tc.wrapped, text: "something went wrong with (the conversation's session)"}
		for _, shape := range []wireShape{shapeOpenAI, shapeAnthropic} {
			status, kind, h := classified(t, g, shape, disguised)
			want := tc.openAI
			if shape == shapeAnthropic {
				want = tc.anthropic
			}
			if status != tc.status || kind != want {
				t.Errorf("%v under other text, shape %d: %d %s, want %d %s", tc.sentinel, shape, status, kind, tc.status, want)
			}
			if got := h.Get("Retry-After") != ""; got != tc.wantRetryAfter {
				t.Errorf("%v: Retry-After %q", tc.sentinel, h.Get("Retry-After"))
			}
			// The sentinel's words without the sentinel: not the domain's.
			status, kind, _ = classified(t, g, shape, errors.New(tc.sentinel.Error()))
			internal := "server_error"
			if shape == shapeAnthropic {
				internal = "api_error"
			}
			if status != http.StatusInternalServerError || kind != internal {
				t.Errorf("the text %q without its sentinel, shape %d: %d %s, want 500 %s", tc.sentinel.Error(), shape, status, kind, internal)
			}
		}
	}
	// A validation error is classified by its type, whatever it says.
	if status, kind, _ := classified(t, g, shapeOpenAI, fmt.Errorf("parse: %w", chat.Invalid("messages", "not found"))); status != 400 || kind != "invalid_request_error" {
		t.Errorf("InvalidError: %d %s", status, kind)
	}
}

// classified writes err as writeDomainError does and returns the status,
// the error's code (OpenAI; its type when it has no code) or type
// (Anthropic), and the headers.
func classified(t *testing.T, g *Gateway, shape wireShape, err error) (int, string, http.Header) {
	t.Helper()
	rec := httptest.NewRecorder()
	g.writeDomainError(context.Background(), rec, shape, err)
	var body struct {
		Error struct {
			Type string  `json:"type"`
			Code *string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("%v: body %q: %v", err, rec.Body.String(), err)
	}
	kind := body.Error.Type
	if shape == shapeOpenAI && body.Error.Code != nil {
		kind = *body.Error.Code
	}
	return rec.Code, kind, rec.Header()
}
