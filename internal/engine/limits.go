package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sync/semaphore"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/tokens"
)

// Limits bound what one request or tenant may ask for, and how much text the
// whole server tokenizes at once.
type Limits struct {
	// MaxCountBytes bounds the bytes one request hands to the tokenizer: text,
	// system prompt, tool definitions and messages together, on every path
	// (CountTokens, inline usage, CreateSession, AppendMessages,
	// PrepareContext).
	MaxCountBytes        int
	MaxSessionsPerTenant int
	// CountBudgetBytes is how many bytes of large requests (at least
	// LargeCountBytes each) are tokenized at once, server-wide; further large
	// requests wait their turn (up to the same amount again waits; beyond
	// that they are refused). Smaller requests never wait. 0: no budget.
	CountBudgetBytes int64
	LargeCountBytes  int
	// MaxResponseBytes bounds a page of messages (about: their text plus a
	// fixed overhead per message and part); 0: no bound.
	MaxResponseBytes int
	// MaxViewBytes and MaxViewWindows bound a session's active view at
	// append: in bytes, and in tokens as a multiple of its model's context
	// window (checkViewBound); 0: no bound.
	MaxViewBytes   int
	MaxViewWindows int
	// MaxViewMessages bounds a session's active view in messages, and
	// MaxLogBytesPerTenant what a tenant's logs store in bytes, at append
	// (quotas.go); 0: no bound.
	MaxViewMessages      int
	MaxLogBytesPerTenant int64
	// ExpandMaxRounds is how many contextd_expand rounds one model turn may
	// take (0: DefaultExpandMaxRounds); ExpandToolBytes caps the text of one
	// contextd_expand answer (0: DefaultExpandToolBytes). See expandtool.go.
	ExpandMaxRounds int
	ExpandToolBytes int
}

// The names of the limits, as the configuration spells them, so an error
// says which setting refused the request.
const (
	limitCountBytes   = "CONTEXTD_MAX_COUNT_BYTES"
	limitCountBudget  = "CONTEXTD_COUNT_BUDGET_BYTES"
	limitViewBytes    = "CONTEXTD_MAX_VIEW_BYTES"
	limitViewWindows  = "CONTEXTD_MAX_VIEW_WINDOWS"
	limitViewMessages = "CONTEXTD_MAX_VIEW_MESSAGES"
	limitLogBytes     = "CONTEXTD_MAX_LOG_BYTES_PER_TENANT"
	limitSessions     = "CONTEXTD_MAX_SESSIONS_PER_TENANT"
)

// ErrResourceExhausted is a request over a limit.
var ErrResourceExhausted = errors.New("resource exhausted")

// ErrSessionLimit is a create refused because the tenant holds as many
// live sessions as CONTEXTD_MAX_SESSIONS_PER_TENANT allows; it is also
// ErrResourceExhausted. Unlike a busy count budget it does not pass by
// itself: a caller must not retry it.
var ErrSessionLimit = errors.New("session limit reached")

// ErrOverWindow is a request that does not fit the usable window and that
// contextd may not compact (auto_compact off); it is also
// ErrFailedPrecondition.
var ErrOverWindow = errors.New("over the usable window")

// WithLimits sets the limits (default: none).
func WithLimits(l Limits) Option {
	return func(e *Engine) {
		e.limits = l
		e.counting = nil
		if l.CountBudgetBytes > 0 {
			e.counting = newCountBudget(l.CountBudgetBytes)
		}
	}
}

// textBytes is how many bytes of text a request hands to the tokenizer.
func textBytes(text, system string, tools []chat.Tool, msgs []chat.Message) int {
	n := len(text) + len(system)
	for _, t := range tools {
		n += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	for i := range msgs {
		n += len(msgs[i].Name)
		for _, p := range msgs[i].Parts {
			n += len(p.Text)
			if c := p.ToolCall; c != nil {
				n += len(c.ID) + len(c.Name) + len(c.Arguments)
			}
			if r := p.ToolResult; r != nil {
				n += len(r.ToolCallID) + len(r.Content)
			}
		}
	}
	return n
}

// Fixed costs, in bytes, that each message, part and tool call of a request
// is charged against the count limits on top of its text: decoding,
// validating, framing, storing and answering one costs work and memory
// whatever its text (a million empty parts once cost 400 MB and counted as
// nothing). Measured over the listener (internal/app, TestHostileStructure):
// a message costs about the allocation of 1 KB of text whatever its
// content, and an unanswered tool call becomes a stored message (its
// interrupted result) as well as a row of its own; with these charges an
// append at the caps costs, per byte charged, within 3× an append of text.
const (
	messageCost  = 256
	partCost     = 32
	toolCallCost = 1024
)

// countCost is what a request is charged against the count limits: its
// text, its tools as the model's framing renders them (tokens.ToolBytes: a
// nested schema renders larger than it is sent), and the fixed cost of its
// structure.
func countCost(fr tokens.Framing, text, system string, tools []chat.Tool, msgs []chat.Message) int {
	n := textBytes(text, system, nil, msgs) + tokens.ToolBytes(fr, tools) + messageCost*len(msgs)
	for i := range msgs {
		n += partCost*len(msgs[i].Parts) + len(msgs[i].Metadata[chat.MetaCarried]) // tokenized too (tokens.CountMessage)
		for _, p := range msgs[i].Parts {
			if p.ToolCall != nil {
				n += toolCallCost
			}
		}
	}
	return n
}

// admitCount checks a request's cost (countCost) against the per-request
// limit and, for a large one, waits for its share of the server-wide
// counting budget. The caller must call release when it has finished
// tokenizing (calling it again is harmless).
func (e *Engine) admitCount(ctx context.Context, fr tokens.Framing, text, system string, tools []chat.Tool, msgs []chat.Message) (release func(), err error) {
	n := countCost(fr, text, system, tools, msgs)
	if max := e.limits.MaxCountBytes; max > 0 && n > max {
		return nil, fmt.Errorf("the request costs %d bytes to count (its text, system prompt, tools as rendered for the model, and %d bytes a message, %d a part, %d a tool call); %s allows %d per request: %w",
			n, messageCost, partCost, toolCallCost, limitCountBytes, max, ErrResourceExhausted)
	}
	if e.counting == nil || n < e.limits.LargeCountBytes {
		return func() {}, nil
	}
	return e.counting.acquire(ctx, int64(n))
}

// countBudget is a byte-weighted semaphore over the text being tokenized at
// once, with a bounded queue: what waits holds its request in memory too.
type countBudget struct {
	size    int64
	sem     *semaphore.Weighted
	waiting *semaphore.Weighted // bytes admitted to wait (or run)
}

func newCountBudget(size int64) *countBudget {
	return &countBudget{size: size, sem: semaphore.NewWeighted(size), waiting: semaphore.NewWeighted(2 * size)}
}

// acquire takes n bytes of the budget (a request larger than the whole
// budget takes all of it, so it runs alone), waiting while others count.
func (b *countBudget) acquire(ctx context.Context, n int64) (func(), error) {
	w := min(n, b.size)
	if !b.waiting.TryAcquire(w) {
		return nil, fmt.Errorf("the server is already counting and queueing %d bytes of large requests, the most %s allows; retry later: %w",
			2*b.size, limitCountBudget, ErrResourceExhausted)
	}
	if err := b.sem.Acquire(ctx, w); err != nil {
		b.waiting.Release(w)
		return nil, err
	}
	return sync.OnceFunc(func() { b.sem.Release(w); b.waiting.Release(w) }), nil
}

// fitResponse returns how many of msgs (at least one, when there are any)
// fit in MaxResponseBytes.
func (e *Engine) fitResponse(msgs []chat.Message) int {
	limit := e.limits.MaxResponseBytes
	if limit <= 0 {
		return len(msgs)
	}
	total := 0
	for i := range msgs {
		total += messageBytes(&msgs[i])
		if total > limit && i > 0 {
			return i
		}
	}
	return len(msgs)
}

// messageBytes estimates a message's encoded size: its text, ids and
// metadata, plus a fixed allowance per message and part for framing and
// numbers.
//
// The size is the larger of the encodings a client may ask for: protobuf
// carries text as is, the JSON of Connect and gRPC-Web JSON escapes some
// bytes (a control character takes six), and a page sized by its raw bytes
// could encode past what the transcoder buffers (CONTEXTD_MAX_MESSAGE_BYTES)
// or the client receives.
func messageBytes(m *chat.Message) int {
	n := 64 + len(m.ID) + textBytes("", "", nil, []chat.Message{*m}) + 32*len(m.Parts) + 16*len(m.Replaces)
	n += jsonEscapes(m.Name)
	for _, p := range m.Parts {
		n += jsonEscapes(p.Text)
		if c := p.ToolCall; c != nil {
			n += jsonEscapes(c.ID) + jsonEscapes(c.Name) + jsonEscapes(c.Arguments)
		}
		if r := p.ToolResult; r != nil {
			n += jsonEscapes(r.ToolCallID) + jsonEscapes(r.Content)
		}
	}
	for k, v := range m.Metadata {
		n += len(k) + len(v) + 8 + jsonEscapes(k) + jsonEscapes(v)
	}
	for _, r := range m.Replaces {
		n += len(r)
	}
	return n
}

// jsonEscapes is how many bytes longer s is in a JSON string than raw, as
// protojson writes it: '"', '\', \b, \f, \n, \r and \t take two bytes,
// other control characters six (\u00XX).
func jsonEscapes(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
			n++
		case c < 0x20:
			n += 5
		}
	}
	return n
}
