// Package engine holds contextd's use cases: counting, usage, and (with the
// storage and compaction issues) append, prepare, compact, revert, expand and
// hand-off. It speaks domain types only; the API package converts protobuf.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/summarize"
	"github.com/contextd/contextd/internal/telemetry"
	"github.com/contextd/contextd/internal/tokens"
	"github.com/contextd/contextd/internal/watch"
)

// Engine runs the use cases. It is safe for concurrent use.
type Engine struct {
	encodings    *tokens.Encodings
	models       *tokens.Registry
	store        store.Store
	summarizers  *summarize.Set
	revertWindow time.Duration
	notifier     Notifier
	counter      ProviderCounter
	limits       Limits
	counting     *countBudget // nil: no server-wide budget
	log          *slog.Logger
	metrics      *telemetry.Metrics
	now          func() time.Time
	views        *viewCache
	bg           *backgroundState // nil: no background compaction
	latency      llmLatency
}

// WithMetrics records domain metrics (tokens counted, compactions, summaries).
func WithMetrics(m *telemetry.Metrics) Option { return func(e *Engine) { e.metrics = m } }

// WithProviderCounter counts requests of the counter's provider with its
// own endpoint (Anthropic count_tokens) in CountTokens and inline usage.
func WithProviderCounter(c ProviderCounter) Option { return func(e *Engine) { e.counter = c } }

// Notifier announces committed changes to watchers.
type Notifier interface {
	Notify(ctx context.Context, c watch.Change)
}

// TxNotifier is a Notifier that can announce a change from inside the
// transaction that makes it (PostgreSQL: NOTIFY is delivered at commit,
// never for a rolled-back transaction), saving the round trip after it.
// NotifyTx reports false when it cannot for tx.
type TxNotifier interface {
	Notifier
	NotifyTx(ctx context.Context, tx store.Tx, c watch.Change) (bool, error)
}

// announceTx announces a change that tx makes, when the notifier can do
// it inside tx; sent reports whether it did (if not, the caller calls
// notify after the commit).
func (e *Engine) announceTx(ctx context.Context, tx store.Tx, tenant, id string, version int64, ev watch.Event) (sent bool, err error) {
	n, ok := e.notifier.(TxNotifier)
	if !ok {
		return false, nil
	}
	return n.NotifyTx(ctx, tx, watch.Change{Tenant: tenant, SessionID: id, Version: version, Event: ev})
}

// WithNotifier sets where committed changes are announced.
func WithNotifier(n Notifier) Option { return func(e *Engine) { e.notifier = n } }

// notify announces a committed change; watchers read the status themselves.
func (e *Engine) notify(ctx context.Context, tenant, id string, version int64, ev watch.Event) {
	if e.notifier != nil {
		e.notifier.Notify(ctx, watch.Change{Tenant: tenant, SessionID: id, Version: version, Event: ev})
	}
}

// Option configures an Engine.
type Option func(*Engine)

// WithSummarizers sets the summarizers the summarize tier can use (default:
// only the built-in extractive one).
func WithSummarizers(s *summarize.Set) Option { return func(e *Engine) { e.summarizers = s } }

// WithLogger sets where the engine logs what tenants are told only in short
// (a provider's error text).
func WithLogger(l *slog.Logger) Option { return func(e *Engine) { e.log = l } }

// WithRevertWindow sets how long compactions can be reverted (default 24 h).
func WithRevertWindow(d time.Duration) Option { return func(e *Engine) { e.revertWindow = d } }

// WithClock replaces time.Now (tests).
func WithClock(now func() time.Time) Option { return func(e *Engine) { e.now = now } }

// New returns an engine over shared encodings, a model registry and a store.
func New(encodings *tokens.Encodings, models *tokens.Registry, st store.Store, opts ...Option) *Engine {
	extractive, _ := summarize.NewSet("extractive", nil)
	e := &Engine{encodings: encodings, models: models, store: st, summarizers: extractive,
		revertWindow: DefaultRevertWindow, now: time.Now,
		log: slog.New(slog.DiscardHandler), views: newViewCache(DefaultViewCacheBytes)}
	for _, o := range opts {
		o(e)
	}
	return e
}

// Models returns the registry's models, sorted by name, and the model that
// unknown names are counted as.
func (e *Engine) Models() ([]tokens.Model, tokens.Model) {
	return e.models.Models(), tokens.DefaultModel
}

// CountInput is a CountTokens request: Text alone, or a chat request.
type CountInput struct {
	Model    string
	Encoding string
	Text     string
	System   string
	Tools    []chat.Tool
	Messages []chat.Message
}

// IsChat reports whether the input is a chat request rather than plain text.
func (in CountInput) IsChat() bool {
	return in.System != "" || len(in.Tools) > 0 || len(in.Messages) > 0
}

// CountResult is the answer to CountTokens.
type CountResult struct {
	Total     int64
	Encoding  string
	Model     string
	Exact     bool
	Breakdown tokens.RequestCount // zero for plain text
	Warnings  []string
}

// CountTokens counts plain text, or a chat request with framing.
func (e *Engine) CountTokens(ctx context.Context, in CountInput) (CountResult, error) {
	var res CountResult
	if err := chat.CheckStructure("messages", in.Messages); err != nil {
		return res, err
	}
	framing := tokens.DefaultFraming
	encName := tokens.CL100KBase
	var model *tokens.Model // set when counting for a model
	switch {
	case in.Encoding != "":
		if !slices.Contains(tokens.EncodingNames, in.Encoding) {
			return res, chat.Invalid("encoding", "unknown encoding %q; known: %s", in.Encoding, strings.Join(tokens.EncodingNames, ", "))
		}
		if !e.encodings.Available(in.Encoding) {
			return res, chat.Invalid("encoding", "the %s vocabulary is not imported on this server (contextd tokenizer import; %s)", in.Encoding, tokens.VocabDirEnv)
		}
		encName = in.Encoding
	case in.Model != "":
		m, known := e.models.Lookup(in.Model)
		if !known {
			return res, chat.Invalid("model", "unknown model %q; see ListModels, or give an encoding instead", in.Model)
		}
		encName, framing, res.Model, res.Exact = m.Encoding, tokens.FramingOf(m), in.Model, m.Exact
		model = &m
	}
	release, err := e.admitCount(ctx, framing, in.Text, in.System, in.Tools, in.Messages)
	if err != nil {
		return res, err
	}
	defer release()
	enc, err := e.encodings.Get(encName)
	if err != nil {
		return res, encodingError(encName, err)
	}
	res.Encoding = encName
	if in.Encoding != "" {
		res.Exact = true // exact for that encoding, by definition
	}
	if !in.IsChat() {
		res.Total = int64(enc.Count(in.Text))
		e.metrics.TokensCounted(encName, res.Total)
		return res, nil
	}
	if err := validateRequest(in.Tools, in.Messages, "tools", "messages"); err != nil {
		return res, err
	}
	res.Breakdown = tokens.CountRequest(enc, framing, in.System, in.Tools, in.Messages)
	res.Total = res.Breakdown.Total()
	release() // the provider call below may take a while and tokenizes nothing
	e.metrics.TokensCounted(encName, res.Total)
	if model != nil {
		if n, warn := e.providerCount(ctx, *model, in.System, in.Tools, in.Messages); n > 0 {
			res.Total, res.Exact = n, true
			res.Warnings = append(res.Warnings, "total counted by the provider's count_tokens endpoint; the breakdown is the local estimate")
		} else if warn != "" {
			res.Warnings = append(res.Warnings, warn)
		}
	}
	return res, nil
}

func validateRequest(tools []chat.Tool, msgs []chat.Message, toolsField, msgsField string) error {
	if err := chat.ValidateTools(toolsField, tools); err != nil {
		return err
	}
	return chat.ValidateMessages(msgsField, msgs)
}

func unknownModelWarning(name string) string {
	d := tokens.DefaultModel
	return fmt.Sprintf("model %q is not in the registry; counted with the default: %d-token window, %s, approximate",
		name, d.ContextWindow, d.Encoding)
}

// lockedSession reads (and, inside a write transaction, locks) the session,
// with a NotFound that names it.
func lockedSession(ctx context.Context, tx store.Tx, tenant, id string) (store.Session, error) {
	s, err := tx.GetSession(ctx, tenant, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Session{}, fmt.Errorf("session %q: %w", id, store.ErrNotFound)
	}
	return s, err
}
