// Package gateway serves the providers' own HTTP APIs — OpenAI Chat
// Completions (/v1/chat/completions), OpenAI Responses (/v1/responses) and
// Anthropic Messages (/v1/messages, /v1/messages/count_tokens) — in front of
// the one engine, so an agent whose code nobody changed gets contextd's
// context management by pointing its base URL here.
//
// Per request: find the session (X-Contextd-Session, or one derived from
// the conversation's start), match the whole history the client resends
// against the session's log and append only what is new, run PrepareContext,
// send the prepared view upstream in the provider's shape, relay the answer
// (SSE event by event), and record the provider's usage and the assistant's
// reply as ReportUsage and AppendMessages would. With the session policy's
// expose_expand_tool on, the model's contextd_expand calls are answered here
// and never reach the client (expandloop.go).
//
// The request path of a door is six stages over one request value,
// exchange.go's table: admit, identify, prepare, forward, relay, record.
//
// Translation lives at the edge, one file per provider shape
// (openai_chat.go, openai_responses.go, anthropic.go), to and from the
// domain's chat.Message; what a shape carries that the domain does not
// (images' data, thinking blocks, reasoning items, unknown fields) rides
// along verbatim in the message's metadata (raw.go).
package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/telemetry"
	"github.com/contextd/contextd/internal/tokens"
)

// Config is what the gateway needs from the composition root.
type Config struct {
	Engine *engine.Engine
	Models *tokens.Registry
	// Keys authenticate X-Contextd-Key (auth.Off(): every caller is the
	// default tenant). Limiter, when set, limits each tenant's requests.
	Keys    *auth.Keys
	Limiter *auth.RateLimiter
	// Upstreams, with the SDKs' conventions: OpenAI's base includes /v1,
	// Anthropic's does not. Empty: the providers' public APIs.
	OpenAIBaseURL    string
	AnthropicBaseURL string
	// Keys used when a client sends no credentials of its own, if
	// LendKeys (off by default: they are the summarizers' keys).
	OpenAIAPIKey    string
	AnthropicAPIKey string
	LendKeys        bool
	// MaxBodyBytes bounds a request body (the server's message limit).
	MaxBodyBytes int64
	// MemoBytes bounds the memo of parsed messages and tools lists
	// (memo.go, toolsmemo.go); 0: 64 MiB.
	MemoBytes int
	// StreamKeepalive: a streamed answer the expand loop holds this long
	// gets its headers, then an SSE comment line this often (keepalive.go;
	// 0: held silently).
	StreamKeepalive time.Duration
	// StreamWriteTimeout bounds each write of an answer to the client
	// (writedeadline.go): a client that reads nothing for this long is cut
	// and the upstream request cancelled. 0: no deadline.
	StreamWriteTimeout time.Duration
	// HTTPClient reaches the upstreams (nil: a client with no overall
	// timeout, since streams may last minutes; the caller's context ends
	// them; and that follows no redirect).
	HTTPClient *http.Client
	Log        *slog.Logger
	// Metrics counts the gateway's own writes that failed (nil: none).
	Metrics *telemetry.Metrics
}

// SessionLabel is the label key of the sessions the gateway makes (its
// value names the door); the retention run closes those idle for
// CONTEXTD_GATEWAY_SESSION_TTL.
// Their placeholders name ids without telling the model to call
// ExpandMessage, which it cannot (engine.GatewayLabel).
const SessionLabel = engine.GatewayLabel

// Default upstreams.
const (
	defaultOpenAIBase    = "https://api.openai.com/v1"
	defaultAnthropicBase = "https://api.anthropic.com"
)

// Headers the gateway reads or answers with.
const (
	HeaderKey       = "X-Contextd-Key"
	HeaderSession   = "X-Contextd-Session"
	HeaderUsed      = "X-Contextd-Used-Percent"
	HeaderCompacted = "X-Contextd-Compacted"
	HeaderHistory   = "X-Contextd-History"
	HeaderWarning   = "X-Contextd-Warning"
	HeaderPin       = "X-Contextd-Pin"
)

// Gateway is the HTTP handler of the provider-compatible endpoints.
type Gateway struct {
	cfg     Config
	client  *http.Client
	log     *slog.Logger
	digests *logCache
	chat    door
	resp    door
	msgs    door
	// inflight holds, per session, a channel closed when the answer last
	// relayed for it is recorded: the session's next request waits for
	// it, so it finds the reply in the log. records counts the recordings
	// running after their answers went out (Wait).
	inflight sync.Map
	records  sync.WaitGroup
	mu       sync.Mutex
	closing  bool
}

// startRecord counts a recording about to start; false once Wait began
// (the store is about to close: the answer is not recorded).
func (g *Gateway) startRecord() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closing {
		return false
	}
	g.records.Add(1)
	return true
}

// Wait stops new recordings and waits until the answers already relayed
// are recorded, or ctx ends; the composition root calls it after the
// listener has drained and before the store closes.
func (g *Gateway) Wait(ctx context.Context) {
	g.mu.Lock()
	g.closing = true
	g.mu.Unlock()
	done := make(chan struct{})
	go func() { g.records.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// New returns a gateway.
func New(cfg Config) *Gateway {
	if cfg.OpenAIBaseURL == "" {
		cfg.OpenAIBaseURL = defaultOpenAIBase
	}
	if cfg.AnthropicBaseURL == "" {
		cfg.AnthropicBaseURL = defaultAnthropicBase
	}
	cfg.OpenAIBaseURL = strings.TrimRight(cfg.OpenAIBaseURL, "/")
	cfg.AnthropicBaseURL = strings.TrimRight(cfg.AnthropicBaseURL, "/")
	if cfg.Keys == nil {
		cfg.Keys = auth.Off()
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 16 << 20
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	client := cfg.HTTPClient
	if client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.ResponseHeaderTimeout = 10 * time.Minute
		tr.MaxIdleConnsPerHost = 64
		// A redirect goes back to the client as the provider sent it, as
		// a proxy passes it on: followed here, the client's x-api-key
		// (which net/http strips from no redirect) would go to whatever
		// host the Location names.
		client = &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if cfg.MemoBytes <= 0 {
		cfg.MemoBytes = memoBytes
	}
	m := newMemo(cfg.MemoBytes)
	return &Gateway{cfg: cfg, client: client, log: log, digests: newLogCache(logCacheBytes),
		chat: openAIChat{m}, resp: openAIResponses{m}, msgs: anthropicMessages{m}}
}

// Prefix is where the gateway is mounted.
const Prefix = "/v1/"

// ServeHTTP routes the provider paths.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w, undeadline := withWriteDeadlines(w, g.cfg.StreamWriteTimeout)
	defer undeadline()
	if serve := g.route(r.URL.Path); serve != nil {
		serve(w, r)
		return
	}
	g.servePassthrough(w, r)
}

// route is the handler of the paths contextd serves itself; nil for the
// others, which pass through.
func (g *Gateway) route(path string) http.HandlerFunc {
	switch path {
	case "/v1/chat/completions":
		return func(w http.ResponseWriter, r *http.Request) { g.serveDoor(w, r, g.chat) }
	case "/v1/responses":
		return func(w http.ResponseWriter, r *http.Request) { g.serveDoor(w, r, g.resp) }
	case "/v1/messages":
		return func(w http.ResponseWriter, r *http.Request) { g.serveDoor(w, r, g.msgs) }
	case "/v1/messages/count_tokens":
		return g.serveCount
	case "/v1/models":
		return g.serveModels
	}
	return nil
}

// shapeOf says whose request one that reached no door is (its error
// shape and its upstream): an Anthropic client always sends
// anthropic-version, and its key in x-api-key (OpenAI's is in
// Authorization).
func shapeOf(r *http.Request) wireShape {
	if r.Header.Get("anthropic-version") != "" || strings.HasPrefix(r.URL.Path, "/v1/messages") ||
		r.Header.Get("X-Api-Key") != "" && r.Header.Get("Authorization") == "" {
		return shapeAnthropic
	}
	return shapeOpenAI
}

// tooLarge says why a body over MaxBodyBytes is refused.
func (g *Gateway) tooLarge() string {
	return fmt.Sprintf("request body is over %d bytes, the most this server accepts (CONTEXTD_MAX_MESSAGE_BYTES)", g.cfg.MaxBodyBytes)
}

// readBody reads a JSON object body of at most MaxBodyBytes, checked and
// split in one pass (decode.go).
func (g *Gateway) readBody(w http.ResponseWriter, r *http.Request, shape wireShape) (*requestBody, bool) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, shape, http.StatusMethodNotAllowed, errInvalid, r.URL.Path+" takes POST")
		return nil, false
	}
	body, err := readAll(http.MaxBytesReader(w, r.Body, g.cfg.MaxBodyBytes), r.ContentLength, g.cfg.MaxBodyBytes)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		writeError(w, shape, http.StatusRequestEntityTooLarge, errTooLarge, g.tooLarge())
		return nil, false
	}
	if err != nil {
		writeError(w, shape, http.StatusBadRequest, errInvalid, "reading the request body: "+err.Error())
		return nil, false
	}
	b, err := scanBody(body)
	if err != nil {
		writeError(w, shape, http.StatusBadRequest, errInvalid, "the request body is not a JSON object: "+err.Error())
		return nil, false
	}
	return b, true
}

// detach keeps the values of ctx but not its cancellation, for the writes
// that record a call the provider answered: a client that hangs up after
// the answer must not leave the session without it.
func detach(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
}
