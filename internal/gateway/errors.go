package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

// wireShape is whose error format a door answers in.
type wireShape int

const (
	shapeOpenAI wireShape = iota + 1
	shapeAnthropic
)

// errKind is contextd's reason for refusing a request, spelled in each
// provider's error vocabulary by writeError.
type errKind int

const (
	errInvalid errKind = iota + 1
	errAuth
	errNotFound
	errRateLimit
	errTooLarge
	errContextLength
	errUpstream
	errInternal
	errConflict
	errSessionLimit
)

// OpenAI's error types (type, and code where the API sets one).
var openAITypes = map[errKind][2]string{
	errInvalid:       {"invalid_request_error", ""},
	errAuth:          {"invalid_request_error", "invalid_api_key"},
	errNotFound:      {"invalid_request_error", "not_found"},
	errRateLimit:     {"rate_limit_exceeded", "rate_limit_exceeded"},
	errTooLarge:      {"invalid_request_error", "request_too_large"},
	errContextLength: {"invalid_request_error", "context_length_exceeded"},
	errUpstream:      {"server_error", "upstream_error"},
	errInternal:      {"server_error", ""},
	errConflict:      {"invalid_request_error", "conflict"},
	errSessionLimit:  {"invalid_request_error", "contextd_session_limit"},
}

// Anthropic's error types.
var anthropicTypes = map[errKind]string{
	errInvalid:       "invalid_request_error",
	errAuth:          "authentication_error",
	errNotFound:      "not_found_error",
	errRateLimit:     "rate_limit_error",
	errTooLarge:      "request_too_large",
	errContextLength: "invalid_request_error",
	errUpstream:      "api_error",
	errInternal:      "api_error",
	errConflict:      "invalid_request_error",
	errSessionLimit:  "permission_error",
}

// writeError answers with contextd's refusal in the provider's error shape,
// so SDKs raise their usual exceptions. The message says it is contextd's.
func writeError(w http.ResponseWriter, shape wireShape, status int, kind errKind, msg string) {
	msg = "contextd: " + msg
	var body any
	if shape == shapeAnthropic {
		body = map[string]any{"type": "error", "error": map[string]any{"type": anthropicTypes[kind], "message": msg}}
	} else {
		t := openAITypes[kind]
		e := map[string]any{"message": msg, "type": t[0], "param": nil, "code": nil}
		if t[1] != "" {
			e["code"] = t[1]
		}
		body = map[string]any{"error": e}
	}
	b, _ := json.Marshal(body)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Del("Content-Length")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writeDomainError maps an engine error once, as the gRPC API's toStatus
// does, to the HTTP status and error type a provider would use. Errors that
// are not the domain's are logged and answered without their text.
func (g *Gateway) writeDomainError(ctx context.Context, w http.ResponseWriter, shape wireShape, err error) {
	var invalid *chat.InvalidError
	switch {
	case errors.As(err, &invalid):
		writeError(w, shape, http.StatusBadRequest, errInvalid, invalid.Error())
	case errors.Is(err, store.ErrNotFound):
		writeError(w, shape, http.StatusNotFound, errNotFound, err.Error())
	case errors.Is(err, store.ErrVersionConflict), errors.Is(err, store.ErrAlreadyExists):
		writeError(w, shape, http.StatusConflict, errConflict, err.Error())
	case errors.Is(err, engine.ErrSessionLimit):
		// Not a rate limit: it does not pass by waiting, and SDKs retry a
		// 429 (or a 5xx) for ever. The message names the setting.
		writeError(w, shape, http.StatusForbidden, errSessionLimit, err.Error())
	case errors.Is(err, engine.ErrResourceExhausted):
		writeError(w, shape, http.StatusTooManyRequests, errRateLimit, err.Error())
	case errors.Is(err, compaction.ErrTooLarge), errors.Is(err, engine.ErrOverWindow):
		// A request that does not fit even after every tier (or with
		// auto-compaction off): the provider's own context-length error,
		// with contextd's reason.
		writeError(w, shape, http.StatusBadRequest, errContextLength, err.Error())
	case errors.Is(err, engine.ErrFailedPrecondition):
		writeError(w, shape, http.StatusBadRequest, errInvalid, err.Error())
	case errors.Is(err, context.Canceled):
		writeError(w, shape, 499, errInvalid, "request canceled")
	case errors.Is(err, context.DeadlineExceeded):
		writeError(w, shape, http.StatusGatewayTimeout, errUpstream, "deadline exceeded")
	case errors.Is(err, store.ErrUnavailable):
		// A database restart or failover: 503, which the SDKs retry, as
		// the gRPC API answers Unavailable.
		g.log.WarnContext(ctx, "database unavailable", slog.String("error", err.Error()))
		w.Header().Set("Retry-After", "1")
		writeError(w, shape, http.StatusServiceUnavailable, errInternal, "the database is unavailable; retry")
	default:
		g.log.ErrorContext(ctx, "gateway internal error", slog.String("error", err.Error()))
		writeError(w, shape, http.StatusInternalServerError, errInternal, "internal error")
	}
}

// refusal is contextd's own answer in place of the provider's (the
// provider unreachable, its answer unreadable or unusable): a status and
// a kind, written in the door's error shape.
type refusal struct {
	status int
	kind   errKind
	msg    string
}

func (e *refusal) Error() string { return e.msg }

func refused(status int, kind errKind, msg string) error {
	return &refusal{status: status, kind: kind, msg: msg}
}
