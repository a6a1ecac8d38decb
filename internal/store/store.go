// Package store owns where sessions and messages are kept: one Store
// interface with sentinel errors and transactions as closures, implemented by
// the postgres (production, many replicas) and sqlite (embedded, one process)
// packages, both held to the conformance suite in storetest.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
)

// Sentinel errors; backends wrap them with %w.
var (
	ErrNotFound        = errors.New("not found")
	ErrAlreadyExists   = errors.New("already exists")
	ErrVersionConflict = errors.New("version conflict")
)

// DefaultTenant scopes every row until authentication maps callers to
// tenants.
const DefaultTenant = "default"

// Session is a stored session with its cached token aggregates.
type Session struct {
	Tenant       string
	ID           string
	Model        string
	SystemPrompt string
	Tools        []chat.Tool
	Policy       compaction.Overrides
	Labels       map[string]string
	// Version is bumped by every change.
	Version int64
	// SystemTokens and ToolsTokens are the counts of the system prompt and
	// tool definitions for Model.
	SystemTokens int64
	ToolsTokens  int64
	// ActiveTokens and ActiveCount sum the messages of the active view.
	ActiveTokens int64
	ActiveCount  int64
	// LogCount is the position of the newest message in the log.
	LogCount int64
	// ViewSeq is the highest ordinal handed out in the active view.
	ViewSeq   int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ViewEntry places a message in the active view.
type ViewEntry struct {
	Ord       int64
	MessageID string
}

// ToolCall is what the store remembers of a tool call, to pair results.
type ToolCall struct {
	CallID         string
	Position       int64 // of the assistant message that made it
	ResultPosition int64 // of the tool message that answered it; 0 if none
}

// Idempotency is the remembered answer to an append with a key.
type Idempotency struct {
	Key         string
	RequestHash string
	Response    []byte
}

// ListFilter selects sessions for ListSessions.
type ListFilter struct {
	Labels map[string]string
	// Before continues a listing: only sessions ordered after this cursor
	// (created earlier, or at the same time with a smaller id).
	Before *SessionCursor
	Limit  int
}

// SessionCursor is the position of a session in the newest-first listing.
type SessionCursor struct {
	CreatedAt time.Time
	ID        string
}

// Tx is the work one transaction can do. Methods that take a session read
// or write rows of that session only within the tenant.
type Tx interface {
	// GetSession reads a session and, on PostgreSQL, locks its row until the
	// transaction ends, which serializes writers of one session.
	GetSession(ctx context.Context, tenant, id string) (Session, error)
	InsertSession(ctx context.Context, s *Session) error
	// UpdateSession writes every mutable field of s.
	UpdateSession(ctx context.Context, s *Session) error
	// DeleteSession marks a session deleted; it is ErrNotFound from then on.
	DeleteSession(ctx context.Context, tenant, id string) error

	// InsertMessages adds messages (ID, Position, Tokens set) to the log.
	InsertMessages(ctx context.Context, tenant, sessionID string, msgs []chat.Message) error
	// AppendView adds entries at the end of the active view.
	AppendView(ctx context.Context, tenant, sessionID string, entries []ViewEntry) error

	// ToolCalls returns the known tool calls among ids.
	ToolCalls(ctx context.Context, tenant, sessionID string, ids []string) (map[string]ToolCall, error)
	// PutToolCalls inserts or updates tool calls.
	PutToolCalls(ctx context.Context, tenant, sessionID string, calls []ToolCall) error

	// GetIdempotency returns the remembered answer for key, or ErrNotFound.
	GetIdempotency(ctx context.Context, tenant, sessionID, key string) (Idempotency, error)
	PutIdempotency(ctx context.Context, tenant, sessionID string, rec Idempotency) error
}

// Store keeps sessions and messages.
type Store interface {
	// InTx runs fn in one read-write transaction, committed when fn returns
	// nil and rolled back otherwise.
	InTx(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error
	// GetSession reads a session without locking it.
	GetSession(ctx context.Context, tenant, id string) (Session, error)
	// ListSessions returns sessions newest first.
	ListSessions(ctx context.Context, tenant string, f ListFilter) ([]Session, error)
	// ActiveMessages returns the active view after ordinal `after`, in order,
	// at most limit, with each message's ordinal.
	ActiveMessages(ctx context.Context, tenant, sessionID string, after int64, limit int) ([]chat.Message, []int64, error)
	// LogMessages returns the log after position `after`, in order, at most
	// limit.
	LogMessages(ctx context.Context, tenant, sessionID string, after int64, limit int) ([]chat.Message, error)
	// Ping checks the connection.
	Ping(ctx context.Context) error
	Close() error
}
