// Package store owns where sessions and messages are kept: one Store
// interface with sentinel errors and transactions as closures, implemented by
// the postgres (production, many replicas) and sqlite (embedded, one process)
// packages, both held to the conformance suite in storetest.
package store

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
)

// Sentinel errors; backends wrap them with %w.
var (
	ErrNotFound        = errors.New("not found")
	ErrAlreadyExists   = errors.New("already exists")
	ErrVersionConflict = errors.New("version conflict")
	// ErrUnavailable: the database could not be reached (connection
	// refused or cut, server restarting); the call may be retried.
	ErrUnavailable = errors.New("database unavailable")
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
	// ActiveBytes is the active view's size in bytes (the engine's
	// estimate of its messages' encoded size); 0 for sessions stored before
	// it was kept, until their view is next rewritten.
	ActiveBytes int64
	// LogCount is the position of the newest message in the log.
	LogCount int64
	// ViewSeq is the highest ordinal handed out in the active view.
	ViewSeq int64
	// CompactionRound counts compactions (reverted ones included).
	CompactionRound int
	// AutoPausedBelow pauses auto-compaction while ActiveTokens stays below
	// it (0: not paused), after a compaction that saved too little.
	AutoPausedBelow int64
	// ViewEpoch counts rewrites of the active view (compactions, reverts).
	ViewEpoch int
	// The anchor: the provider's input tokens (AnchorInput) for the first
	// AnchorCount active messages, our estimate of that request then
	// (AnchorLocal), taken in AnchorEpoch. AnchorInput 0: no anchor.
	AnchorInput int64
	AnchorLocal int64
	AnchorCount int64
	AnchorEpoch int
	CreatedAt   time.Time
	UpdatedAt   time.Time
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

// Compaction is the record of one compaction.
type Compaction struct {
	ID           string
	Round        int
	Tiers        []string
	TokensBefore int64
	TokensAfter  int64
	Items        []CompactionItem
	Summary      string
	// ViewBefore and ViewAfter are the message ids of the active view before
	// and after, in order; revert restores ViewBefore.
	ViewBefore []string
	ViewAfter  []string
	CreatedAt  time.Time
	ExpiresAt  time.Time
	RevertedAt *time.Time
}

// CompactionItem is one replacement of a compaction.
type CompactionItem struct {
	Tier         string   `json:"tier"`
	NewID        string   `json:"new_id,omitempty"`
	Replaced     []string `json:"replaced"`
	Reason       string   `json:"reason"`
	TokensBefore int64    `json:"tokens_before"`
	TokensAfter  int64    `json:"tokens_after"`
}

// Calibration is the learned ratio of provider to local token counts for a
// model, per tenant.
type Calibration struct {
	Model     string
	Ratio     float64
	Samples   int
	UpdatedAt time.Time
}

// RowSize is a message's place in the active view (Cursor: its ordinal) or
// the log (its position), its id, and the bytes it is stored in (parts,
// metadata, replaced ids and id; the content itself is not read). A fork's
// row that shares its parent's parts (ForkTx) counts them too.
type RowSize struct {
	Cursor int64
	ID     string
	Bytes  int64
}

// Purged counts what a Purge deleted.
type Purged struct {
	Sessions, Messages, IdempotencyKeys int64
	// Examined is the purge's work: sessions listed, view and restorable
	// ids, compaction edges and old message ids it read and visited. It is
	// linear in the data examined (a test holds it to that by ratio).
	Examined int64
}

// ListFilter selects sessions for ListSessions.
type ListFilter struct {
	// ID, when set, selects that one session (a status reads its summary
	// this way).
	ID     string
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
	// CountSessions returns how many live sessions a tenant has, and holds
	// the tenant's creates back until the transaction ends (so a count
	// followed by an insert cannot race another; SQLite's single writer
	// does so already).
	CountSessions(ctx context.Context, tenant string) (int, error)
	// LogBytes returns the bytes a tenant's log holds (every stored
	// message's parts, metadata, replaced ids and id: RowSize's measure),
	// counted by the store on every insert and delete of a message, this
	// transaction's included; parts a fork shares (ForkTx) count once, in
	// the row that holds them (when it goes, in the one row they are
	// copied to, which the others then name). On PostgreSQL it holds the tenant's count
	// until the transaction ends (so does any insert or delete of the
	// tenant's messages): concurrent writers of one tenant cannot both pass
	// a quota. SQLite's single writer does so already.
	LogBytes(ctx context.Context, tenant string) (int64, error)
	// CheckLogBytes fails with over when the tenant's log holds more than
	// quota bytes (LogBytes's count and hold). In a Pipelined transaction
	// PostgreSQL queues it: the server fails the statement, and over is the
	// error of the transaction's next read or of its commit; SQLite notes
	// it, and over is the error of the next UpdateSession (whose statement
	// reads the count) or of InTx (read at the call's end). Either way the
	// call is rolled back, and its count is at least the one at the check.
	CheckLogBytes(ctx context.Context, tenant string, quota int64, over error) error
	// UpdateSession writes every mutable field of s.
	UpdateSession(ctx context.Context, s *Session) error
	// DeleteSession marks a session deleted; it is ErrNotFound from then on.
	DeleteSession(ctx context.Context, tenant, id string) error
	// DeleteUnusedSession marks a session deleted only while it is as it
	// was created at created (version 1, nothing in its log): a compare and
	// delete in one statement, so a session someone else made again or
	// wrote to in between is never deleted. It reports whether it deleted.
	DeleteUnusedSession(ctx context.Context, tenant, id string, created time.Time) (bool, error)
	// DeleteSessionAt marks a session deleted only while it is at version
	// and was created at created: nothing written to it since the caller's
	// last write (no append, no report, no update), and while it has no
	// ledger row, no compaction and no compaction job (a summarizer's call
	// billed, or running, for it: work its client's retry starts from), in
	// one statement. It reports whether it deleted.
	DeleteSessionAt(ctx context.Context, tenant, id string, created time.Time, version int64) (bool, error)

	// InsertMessages adds messages (ID, Position, Tokens set) to the log,
	// with CountedFor (empty stores NULL: unknown).
	InsertMessages(ctx context.Context, tenant, sessionID string, msgs []chat.Message) error
	// SetMessageTokens rewrites the stored token counts of messages (by id),
	// after a model change, and what they were counted for (countedFor;
	// empty stores NULL: unknown); ErrNotFound if an id is not the session's.
	SetMessageTokens(ctx context.Context, tenant, sessionID string, tokens map[string]int64, countedFor string) error
	// AppendView adds entries at the end of the active view.
	AppendView(ctx context.Context, tenant, sessionID string, entries []ViewEntry) error

	// ToolCalls returns the known tool calls among ids.
	ToolCalls(ctx context.Context, tenant, sessionID string, ids []string) (map[string]ToolCall, error)
	// OpenToolCalls returns the session's tool calls that have no result
	// yet, by position of the message that made them, then call id.
	OpenToolCalls(ctx context.Context, tenant, sessionID string) ([]ToolCall, error)
	// PutToolCalls inserts or updates tool calls (both positions: a
	// client's compacted history makes a kept call again, engine
	// pairToolCalls).
	PutToolCalls(ctx context.Context, tenant, sessionID string, calls []ToolCall) error

	// LockCompaction serializes compactions of one session across replicas
	// until the transaction ends (a transaction-scoped advisory lock on
	// PostgreSQL; SQLite transactions are serialized already).
	LockCompaction(ctx context.Context, tenant, sessionID string) error
	// ViewMessages returns the whole active view, in order.
	ViewMessages(ctx context.Context, tenant, sessionID string) ([]chat.Message, error)
	// ReplaceView makes ids the active view, with ordinals 1..len(ids): it
	// writes them as a new generation of the view and makes that the
	// session's (FlipView). The rows of the old generation are not
	// touched: they are invisible from then on, and SweepViews deletes
	// them afterwards, in batches of their own, so a rewrite costs the new
	// view's rows, never the old one's.
	ReplaceView(ctx context.Context, tenant, sessionID string, ids []string) error
	// StageView writes entries into view generation gen, which readers do
	// not see until FlipView makes it the session's: a large view is built
	// in transactions of a batch each, then made current in one short one.
	StageView(ctx context.Context, tenant, sessionID string, gen int64, entries []ViewEntry) error
	// FlipView makes generation gen the session's active view if it holds
	// exactly count entries, and ErrVersionConflict otherwise (a sweep
	// took a generation that a concurrent rewrite made stale). The caller
	// holds the session's row (GetSession in this transaction): SweepViews
	// holds it while it deletes, so the count is not taken from under it.
	FlipView(ctx context.Context, tenant, sessionID string, gen int64, count int) error
	// MessagesByID returns the messages with these ids, in the order given.
	MessagesByID(ctx context.Context, tenant, sessionID string, ids []string) ([]chat.Message, error)
	InsertCompaction(ctx context.Context, tenant, sessionID string, c *Compaction) error
	GetCompaction(ctx context.Context, tenant, sessionID, id string) (Compaction, error)
	MarkReverted(ctx context.Context, tenant, sessionID, id string, at time.Time) error

	// GetCalibration returns a model's calibration, or ErrNotFound, and holds
	// it until the transaction ends, so that concurrent read-modify-writes
	// (PutCalibration) lose no update.
	GetCalibration(ctx context.Context, tenant, model string) (Calibration, error)
	PutCalibration(ctx context.Context, tenant string, c Calibration) error

	// GetIdempotency returns the remembered answer for key, or ErrNotFound.
	GetIdempotency(ctx context.Context, tenant, sessionID, key string) (Idempotency, error)
	PutIdempotency(ctx context.Context, tenant, sessionID string, rec Idempotency) error
	// AddLedger adds one or more calls to a session's ledger with an atomic
	// increment (concurrent adds never lose one another).
	AddLedger(ctx context.Context, tenant, sessionID string, kind LedgerKind, t LedgerTotals) error
	// GetPreparedView returns what the session's latest PrepareContext
	// returned, or ErrNotFound.
	GetPreparedView(ctx context.Context, tenant, sessionID string) (PreparedView, error)
	PutPreparedView(ctx context.Context, tenant, sessionID string, v PreparedView) error

	JobTx
	ForkTx
}

// Store keeps sessions and messages.
type Store interface {
	// InTx runs fn in one read-write transaction, committed when fn returns
	// nil and rolled back otherwise.
	InTx(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error
	// GetSession reads a session without locking it.
	GetSession(ctx context.Context, tenant, id string) (Session, error)
	// ListSessions returns summaries of sessions, newest first: each row
	// without its system prompt and tools (a listing never reads them), with
	// its newest compaction and its ledger, in one query.
	ListSessions(ctx context.Context, tenant string, f ListFilter) ([]SessionSummary, error)
	// ActiveMessages returns the active view after ordinal `after`, in order,
	// at most limit, with each message's ordinal.
	ActiveMessages(ctx context.Context, tenant, sessionID string, after int64, limit int) ([]chat.Message, []int64, error)
	// LogMessages returns the log after position `after`, in order, at most
	// limit.
	LogMessages(ctx context.Context, tenant, sessionID string, after int64, limit int) ([]chat.Message, error)
	// ActiveSizes and LogSizes are ActiveMessages and LogMessages without
	// the messages: each row's cursor (ordinal, position), id and stored
	// size, read without loading the content, so a page can end at a byte
	// budget before any message is read (then MessagesByID).
	ActiveSizes(ctx context.Context, tenant, sessionID string, after int64, limit int) ([]RowSize, error)
	LogSizes(ctx context.Context, tenant, sessionID string, after int64, limit int) ([]RowSize, error)
	// MessagesByID returns the messages with these ids, in the order given.
	MessagesByID(ctx context.Context, tenant, sessionID string, ids []string) ([]chat.Message, error)
	// ListCompactions returns a page of a session's compactions in round
	// order (oldest first): at most limit, those of rounds after afterRound
	// (0: from the first). The round, taken under the session's lock, is the
	// order; created_at is a replica's clock and never decides it.
	ListCompactions(ctx context.Context, tenant, sessionID string, afterRound, limit int) ([]Compaction, error)
	// GetCompaction reads one compaction without locking anything, or
	// ErrNotFound.
	GetCompaction(ctx context.Context, tenant, sessionID, id string) (Compaction, error)
	// LatestCompaction returns a session's newest compaction, or ErrNotFound.
	LatestCompaction(ctx context.Context, tenant, sessionID string) (Compaction, error)
	// GetCalibration returns a model's calibration, or ErrNotFound.
	GetCalibration(ctx context.Context, tenant, model string) (Calibration, error)
	// GetLedger returns a session's ledger (zero totals when nothing was
	// recorded).
	GetLedger(ctx context.Context, tenant, sessionID string) (Ledger, error)
	// Purge deletes what retention no longer keeps: sessions deleted before
	// cutoff, messages created before cutoff that are neither in an active
	// view, nor needed by a compaction that can still be reverted at now, nor
	// behind a summary or placeholder that is in an active view or in the
	// view a revertible compaction restores (transitively: the originals of
	// a summary that a later summary replaced stay expandable), and
	// idempotency records older than a day. It never touches an active view.
	// A session's retained set is read in one transaction (its current view
	// generation, not generations waiting for SweepViews: their entries go
	// with the messages they name), and its unreachable messages are then
	// deleted in batches of their own transactions, so the writer is held
	// for one batch at a time, never for a session's whole purge.
	Purge(ctx context.Context, cutoff, now time.Time) (Purged, error)
	// CloseIdleSessions marks deleted, at now, the live sessions carrying
	// the label key that nothing changed since idleBefore (updated_at), in
	// batches of at most limit per statement; it returns how many. They
	// are archived as deleted sessions are: out of the tenant's live
	// count, their rows kept until Purge's cutoff passes.
	CloseIdleSessions(ctx context.Context, label string, idleBefore, now time.Time, limit int) (int64, error)
	// GetJob reads a session's background compaction job without locking
	// it, or ErrNotFound.
	GetJob(ctx context.Context, tenant, sessionID string) (Job, error)
	// HasDueJob reports, without locking anything, whether NextJob at now
	// with perTenant would find a job (an idle worker's probe before it
	// takes a writer).
	HasDueJob(ctx context.Context, now time.Time, perTenant int) (bool, error)
	HistoryFinder
	CallFinder
	SummaryFinder
	// SweepViews deletes, in one short transaction of its own, at most
	// limit entries of the session's view generations other than its
	// current one (left by ReplaceView and FlipView, or staged by a
	// rewrite that never flipped), and reports how many.
	SweepViews(ctx context.Context, tenant, sessionID string, limit int) (int, error)
	// StrayViewGens returns the view generations that are not their
	// session's current view — replaced ones SweepViews has not deleted
	// yet, ones a live rewrite is staging, and ones a rewrite staged and
	// never flipped (its replica killed between batches), which nothing
	// else would ever delete — of at most sessions sessions: the next ones
	// after after in (tenant, id) order (from the first when after is
	// zero). It finds at most two of a session at a time (the nearest below
	// and above its current one), each by an index probe, never by reading
	// a view, and reports where it stopped: the last session it looked at,
	// or zero when it reached the end (the next call starts over).
	StrayViewGens(ctx context.Context, after StrayCursor, sessions int) ([]ViewGen, StrayCursor, error)
	// DropViewGen deletes, in one short transaction of its own, at most
	// limit rows of view generation g unless it is its session's current
	// one (read holding the session's row, as SweepViews does), and
	// reports how many.
	DropViewGen(ctx context.Context, g ViewGen, limit int) (int, error)
	// Ping checks the connection.
	Ping(ctx context.Context) error
	Close() error
}

// ViewGen names one generation of a session's view.
type ViewGen struct {
	Tenant, SessionID string
	Gen               int64
}

// StrayCursor is where a call of StrayViewGens stopped: the last session
// it looked at; zero, the first session.
type StrayCursor struct{ Tenant, ID string }

// NewViewGen returns a fresh view generation: random, so that concurrent
// rewrites of one session never stage into the same one.
func NewViewGen() int64 { return rand.Int64N(math.MaxInt64-1) + 1 }

// Entries places ids in a view at ordinals after+1, after+2, ...
func Entries(ids []string, after int64) []ViewEntry {
	out := make([]ViewEntry, len(ids))
	for i, id := range ids {
		out[i] = ViewEntry{Ord: after + int64(i) + 1, MessageID: id}
	}
	return out
}

// Rows is what the drivers' result rows share.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// ScanStrayViewGens reads StrayViewGens' rows of (tenant, id, the
// nearest generation below the current one, the nearest above; each NULL
// when there is none) for a call that looked at most sessions: the
// generations and where the call stopped (zero when it found fewer
// sessions: the end).
func ScanStrayViewGens(rows Rows, sessions int) ([]ViewGen, StrayCursor, error) {
	var out []ViewGen
	var last StrayCursor
	n := 0
	for rows.Next() {
		var below, above *int64
		if err := rows.Scan(&last.Tenant, &last.ID, &below, &above); err != nil {
			return nil, StrayCursor{}, err
		}
		n++
		for _, g := range []*int64{below, above} {
			if g != nil {
				out = append(out, ViewGen{Tenant: last.Tenant, SessionID: last.ID, Gen: *g})
			}
		}
	}
	if n < sessions {
		last = StrayCursor{}
	}
	return out, last, rows.Err()
}

// ScanRowSizes reads rows of (cursor, id, bytes).
func ScanRowSizes(rows Rows) ([]RowSize, error) {
	var out []RowSize
	for rows.Next() {
		var r RowSize
		if err := rows.Scan(&r.Cursor, &r.ID, &r.Bytes); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
