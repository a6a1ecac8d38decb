// Package sqlite is the embedded store: one SQLite file (modernc.org/sqlite,
// pure Go, no cgo) in WAL mode, for one process with zero set-up. Writers
// take the database lock at BEGIN (IMMEDIATE), which serializes them; within
// the process they queue on a lock first, so they never meet SQLite's busy
// handler, whose back-off sleeps (up to 100 ms a try) made tail latency.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/migrations"
)

// Store is the SQLite store.
type Store struct {
	db *sql.DB
	// writer admits one write transaction of this process at a time (a
	// channel, so a waiting caller can give up with its context). SQLite
	// allows one writer anyway; queueing here hands the lock over the
	// moment it is free instead of polling for it with sleeps. Another
	// process on the same file still meets busy_timeout.
	writer chan struct{}
	// queue holds the calls of InTx waiting for a group (groupcommit.go).
	queue commitQueue
	// prepared are the hot reads' statements (prepared.go).
	prepared prepared
	// writes is the pool of the group commits' transactions (begin,
	// groupcommit.go) and of the gateway's reads (readPool): the same
	// file, its connections opened with synchronous=NORMAL, and its own
	// prepared statements.
	writes prepared
	// wal and dbFile are the paths walsync.go syncs.
	wal, dbFile string
	// walSyncs counts the durable groups' syncs (walsync.go).
	walSyncs atomic.Int64
	// syncFailed is the first failed fsync of the WAL: every group is
	// refused from then on (walsync.go).
	syncFailed atomic.Pointer[error]
	// counts are the statements run (statements.go).
	counts counters
	// clock is the write turn's busy time (writerbusy.go).
	clock writerClock
	// wrote wakes the checkpointer (checkpoint.go); stop ends it and
	// stopped is closed when it has.
	wrote   chan struct{}
	stop    context.CancelFunc
	stopped chan struct{}
}

var _ store.Store = (*Store)(nil)

// FileName is the database file inside the data directory.
const FileName = "contextd.db"

// Open opens (creating if needed) the database in dir, applies pending
// migrations and returns the store.
func Open(ctx context.Context, dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	// The path is escaped as a URI path: a '#' or '?' in the directory's
	// name would otherwise end the file name there, and the database would
	// be opened elsewhere (TestOpenEscapesPath).
	abs, err := filepath.Abs(filepath.Join(dir, FileName))
	if err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	db, err := openPool(ctx, abs, "FULL")
	if err != nil {
		return nil, err
	}
	if _, err := migrations.UpSQLite(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	db.SetMaxIdleConns(idleConns)
	// The pool of writes: one writer at a time uses it, and the gateway's
	// reads beside it.
	fast, err := openPool(ctx, abs, "NORMAL")
	if err != nil {
		db.Close()
		return nil, err
	}
	fast.SetMaxIdleConns(writesIdleConns)
	s := &Store{db: db, writer: make(chan struct{}, 1), queue: commitQueue{hold: groupHold}, wal: abs + "-wal", dbFile: abs,
		prepared: prepared{db: db}, writes: prepared{db: fast}, wrote: make(chan struct{}, 1), stopped: make(chan struct{})}
	var bg context.Context
	bg, s.stop = context.WithCancel(context.WithoutCancel(ctx))
	go s.checkpointer(bg, s.stopped)
	return s, nil
}

// openPool opens a pool of connections to the database file at abs, each
// with the store's pragmas and the given synchronous level.
func openPool(ctx context.Context, abs, synchronous string) (*sql.DB, error) {
	q := url.Values{}
	for _, p := range []string{"foreign_keys(1)", "journal_mode(WAL)", "synchronous(" + synchronous + ")", "busy_timeout(30000)",
		"wal_autocheckpoint(" + strconv.Itoa(walBackstopPages) + ")", "journal_size_limit(" + strconv.Itoa(walKeepBytes) + ")"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	dsn := "file:" + (&url.URL{Path: filepath.ToSlash(abs)}).EscapedPath() + "?" + q.Encode()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open sqlite: %w", err)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open sqlite: %w", err)
	}
	return db, nil
}

// Ping checks the database.
func (s *Store) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

// Close closes the database.
func (s *Store) Close() error {
	s.stop()
	<-s.stopped
	s.prepared.close()
	s.writes.close()
	return errors.Join(s.writes.db.Close(), s.db.Close())
}

// lockWriter waits for this process's write turn; the returned func ends
// it, its time counted with the groups' (writerbusy.go). After a failed
// sync of the WAL (walsync.go) it refuses, as begin does: a write at FULL
// could be acknowledged by a sync that succeeds without the pages the
// failed one dropped.
func (s *Store) lockWriter(ctx context.Context) (func(), error) {
	select {
	case s.writer <- struct{}{}:
		if err := s.writable(); err != nil {
			<-s.writer
			return nil, err
		}
		start := time.Now()
		return func() { s.clock.held(start); <-s.writer }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting to write: %w", ctx.Err())
	}
}

// querier is what *sql.DB and *sql.Tx share.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

const sessionCols = `tenant, id, model, system_prompt, tools, policy, labels, version, system_tokens,
	tools_tokens, active_tokens, active_count, log_count, view_seq, created_at, updated_at, compaction_round, auto_paused_below,
	view_epoch, anchor_input, anchor_local, anchor_count, anchor_epoch, active_bytes`

// messageCols are a message row's columns (the row is m). A fork's row
// that shares its parts (migration 00013) reads them from the row it
// names: a probe by primary key, made only for such rows.
const messageCols = `m.id, m.position, m.role, m.kind, m.name, m.pinned, ` + partsOf + `, m.metadata, m.tokens, m.created_at, m.replaces, m.counted_for`

// partsOf is row m's parts, its own or those of the row it shares.
const partsOf = `CASE WHEN m.body_session IS NULL THEN m.parts ELSE (SELECT b.parts FROM messages b
	WHERE b.tenant = m.tenant AND b.session_id = m.body_session AND b.id = m.body_id) END`

const compactionCols = `id, round, tiers, tokens_before, tokens_after, items, summary, view_before, view_after, created_at, expires_at, reverted_at`

type scanner interface{ Scan(dest ...any) error }

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

func scanSession(row scanner) (store.Session, error) {
	var s store.Session
	var tools, policy, labels string
	var created, updated int64
	err := row.Scan(&s.Tenant, &s.ID, &s.Model, &s.SystemPrompt, &tools, &policy, &labels, &s.Version,
		&s.SystemTokens, &s.ToolsTokens, &s.ActiveTokens, &s.ActiveCount, &s.LogCount, &s.ViewSeq, &created, &updated,
		&s.CompactionRound, &s.AutoPausedBelow, &s.ViewEpoch, &s.AnchorInput, &s.AnchorLocal, &s.AnchorCount, &s.AnchorEpoch, &s.ActiveBytes)
	if errors.Is(err, sql.ErrNoRows) {
		return s, store.ErrNotFound
	}
	if err != nil {
		return s, err
	}
	s.CreatedAt, s.UpdatedAt = fromNanos(created), fromNanos(updated)
	return s, store.SessionJSON{Tools: tools, Policy: policy, Labels: labels}.DecodeInto(&s)
}

func scanMessage(rows scanner, extra ...any) (chat.Message, error) {
	var m chat.Message
	var role, kind, parts, metadata, replaces string
	var created int64
	var countedFor sql.NullString
	dest := append(extra, &m.ID, &m.Position, &role, &kind, &m.Name, &m.Pinned, &parts, &metadata, &m.Tokens, &created, &replaces, &countedFor)
	if err := rows.Scan(dest...); err != nil {
		return m, err
	}
	var err error
	if m.Replaces, err = store.DecodeIDs(replaces); err != nil {
		return m, err
	}
	m.Role, m.Kind, m.CreatedAt, m.CountedFor = chat.Role(role), chat.Kind(kind), fromNanos(created), countedFor.String
	if err := store.DecodeJSON(parts, &m.Parts); err != nil {
		return m, err
	}
	m.Metadata, err = store.DecodeStringMap(metadata)
	return m, err
}

const getSessionQuery = `SELECT ` + sessionCols + ` FROM sessions WHERE tenant = ? AND id = ? AND deleted_at IS NULL`

// GetSession reads a session (a prepared statement: prepared.go).
func (s *Store) GetSession(ctx context.Context, tenant, id string) (store.Session, error) {
	return scanSession(s.queryRow(ctx, getSessionQuery, tenant, id))
}

// summaryCols are sessionCols of the table aliased s, with the system
// prompt and tools left out (a listing never reads them).
const summaryCols = `s.tenant, s.id, s.model, '', '[]', s.policy, s.labels, s.version, s.system_tokens,
	s.tools_tokens, s.active_tokens, s.active_count, s.log_count, s.view_seq, s.created_at, s.updated_at, s.compaction_round,
	s.auto_paused_below, s.view_epoch, s.anchor_input, s.anchor_local, s.anchor_count, s.anchor_epoch, s.active_bytes` + store.SummaryExtraCols

// ListSessions returns session summaries newest first.
func (s *Store) ListSessions(ctx context.Context, tenant string, f store.ListFilter) ([]store.SessionSummary, error) {
	var where strings.Builder
	args := []any{tenant}
	where.WriteString(`s.tenant = ? AND s.deleted_at IS NULL`)
	if f.ID != "" {
		where.WriteString(` AND s.id = ?`)
		args = append(args, f.ID)
	}
	for k, v := range f.Labels {
		where.WriteString(` AND EXISTS (SELECT 1 FROM json_each(s.labels) WHERE json_each.key = ? AND json_each.value = ?)`)
		args = append(args, k, v)
	}
	if f.Before != nil {
		where.WriteString(` AND (s.created_at < ? OR (s.created_at = ? AND s.id < ?))`)
		n := f.Before.CreatedAt.UnixNano()
		args = append(args, n, n, f.Before.ID)
	}
	args = append(args, f.Limit)
	rows, err := reads{s}.QueryContext(ctx, `SELECT `+summaryCols+store.SummaryJoins+` WHERE `+where.String()+
		` ORDER BY s.created_at DESC, s.id DESC LIMIT ?`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.SessionSummary
	for rows.Next() {
		r, err := scanSummary(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// scanSummary reads a row of summaryCols.
func scanSummary(rows *sql.Rows) (store.SessionSummary, error) {
	var r store.SessionSummary
	var cid, tiers sql.NullString
	var round, before, after, created, expires, reverted sql.NullInt64
	var extra = append([]any{&cid, &round, &tiers, &before, &after, &created, &expires, &reverted}, r.LedgerDest()...)
	sess, err := scanSession(multiScanner{rows, extra})
	if err != nil {
		return r, err
	}
	r.Session = sess
	if cid.Valid {
		c := &store.Compaction{ID: cid.String, Round: int(round.Int64), TokensBefore: before.Int64, TokensAfter: after.Int64,
			CreatedAt: fromNanos(created.Int64), ExpiresAt: fromNanos(expires.Int64)}
		if reverted.Valid {
			t := fromNanos(reverted.Int64)
			c.RevertedAt = &t
		}
		if err := store.DecodeJSON(tiers.String, &c.Tiers); err != nil {
			return r, err
		}
		r.LastCompaction = c
	}
	return r, nil
}

// multiScanner scans a row into a session's columns and then extra.
type multiScanner struct {
	row   scanner
	extra []any
}

func (m multiScanner) Scan(dest ...any) error { return m.row.Scan(append(dest, m.extra...)...) }

// ActiveMessages returns the active view after ordinal `after`.
func (s *Store) ActiveMessages(ctx context.Context, tenant, sessionID string, after int64, limit int) ([]chat.Message, []int64, error) {
	rows, err := reads{s}.QueryContext(ctx, `SELECT v.ord, `+messageCols+`
		FROM view_entries v JOIN messages m ON m.tenant = v.tenant AND m.session_id = v.session_id AND m.id = v.message_id
		WHERE v.tenant = ? AND v.session_id = ? AND v.gen = `+currentGen+` AND v.ord > ? ORDER BY v.ord LIMIT ?`, tenant, sessionID, after, limit)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var msgs []chat.Message
	var ords []int64
	for rows.Next() {
		var ord int64
		m, err := scanMessage(rows, &ord)
		if err != nil {
			return nil, nil, err
		}
		msgs, ords = append(msgs, m), append(ords, ord)
	}
	return msgs, ords, rows.Err()
}

// LogMessages returns the log after position `after`.
func (s *Store) LogMessages(ctx context.Context, tenant, sessionID string, after int64, limit int) ([]chat.Message, error) {
	return collectMessages(reads{s}.QueryContext(ctx, `SELECT `+messageCols+` FROM messages m
		WHERE m.tenant = ? AND m.session_id = ? AND m.position > ? ORDER BY m.position LIMIT ?`, tenant, sessionID, after, limit))
}

func isUniqueViolation(err error) bool {
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed")
}

func collectMessages(rows *sql.Rows, err error) ([]chat.Message, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var msgs []chat.Message
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	return msgs, rows.Err()
}

func messagesByID(ctx context.Context, q querier, tenant, sessionID string, ids []string) ([]chat.Message, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	list, err := store.EncodeIDs(ids)
	if err != nil {
		return nil, err
	}
	msgs, err := collectMessages(q.QueryContext(ctx, `SELECT `+messageCols+` FROM messages m
		WHERE m.tenant = ? AND m.session_id = ? AND m.id IN (SELECT value FROM json_each(?))`, tenant, sessionID, list))
	if err != nil {
		return nil, err
	}
	return store.OrderByIDs(msgs, ids)
}

// MessagesByID returns messages by id, in the order given.
func (s *Store) MessagesByID(ctx context.Context, tenant, sessionID string, ids []string) ([]chat.Message, error) {
	return messagesByID(ctx, s.db, tenant, sessionID, ids)
}

func scanCompaction(row scanner) (store.Compaction, error) {
	var c store.Compaction
	var j store.CompactionJSON
	var created, expires int64
	var reverted sql.NullInt64
	err := row.Scan(&c.ID, &c.Round, &j.Tiers, &c.TokensBefore, &c.TokensAfter, &j.Items, &c.Summary,
		&j.ViewBefore, &j.ViewAfter, &created, &expires, &reverted)
	if errors.Is(err, sql.ErrNoRows) {
		return c, store.ErrNotFound
	}
	if err != nil {
		return c, err
	}
	c.CreatedAt, c.ExpiresAt = fromNanos(created), fromNanos(expires)
	if reverted.Valid {
		t := fromNanos(reverted.Int64)
		c.RevertedAt = &t
	}
	return c, j.DecodeInto(&c)
}

// ListCompactions returns a page of a session's compactions in round order,
// read through the index compactions_by_round.
func (s *Store) ListCompactions(ctx context.Context, tenant, sessionID string, afterRound, limit int) ([]store.Compaction, error) {
	rows, err := reads{s}.QueryContext(ctx, `SELECT `+compactionCols+` FROM compactions
		WHERE tenant = ? AND session_id = ? AND round > ?
		ORDER BY round LIMIT ?`, tenant, sessionID, afterRound, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Compaction
	for rows.Next() {
		c, err := scanCompaction(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

const getCalibrationQuery = `SELECT ratio, samples, updated_at FROM calibrations WHERE tenant = ? AND model = ?`

func getCalibration(ctx context.Context, q querier, tenant, model string) (store.Calibration, error) {
	return scanCalibration(q.QueryRowContext(ctx, getCalibrationQuery, tenant, model), model)
}

func scanCalibration(row scanner, model string) (store.Calibration, error) {
	c := store.Calibration{Model: model}
	var at int64
	err := row.Scan(&c.Ratio, &c.Samples, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return c, store.ErrNotFound
	}
	c.UpdatedAt = fromNanos(at)
	return c, err
}

// GetCalibration returns a model's calibration (a prepared statement).
func (s *Store) GetCalibration(ctx context.Context, tenant, model string) (store.Calibration, error) {
	return scanCalibration(s.queryRow(ctx, getCalibrationQuery, tenant, model), model)
}

// LatestCompaction returns a session's newest compaction.
func (s *Store) LatestCompaction(ctx context.Context, tenant, sessionID string) (store.Compaction, error) {
	return scanCompaction(reads{s}.QueryRowContext(ctx, `SELECT `+compactionCols+` FROM compactions
		WHERE tenant = ? AND session_id = ? ORDER BY round DESC LIMIT 1`, tenant, sessionID))
}

// rowBytes is a message row's stored size; octet_length reads a value's
// size from the record header, not the value.
// A fork's row that shares its parts adds their size (body_bytes).
const rowBytes = `octet_length(m.parts) + m.body_bytes + octet_length(m.metadata) + octet_length(m.replaces) + octet_length(m.id)`

// ActiveSizes returns the sizes of the active view's rows after ordinal
// `after`.
func (s *Store) ActiveSizes(ctx context.Context, tenant, sessionID string, after int64, limit int) ([]store.RowSize, error) {
	return collectSizes(reads{s}.QueryContext(ctx, `SELECT v.ord, m.id, `+rowBytes+`
		FROM view_entries v JOIN messages m ON m.tenant = v.tenant AND m.session_id = v.session_id AND m.id = v.message_id
		WHERE v.tenant = ? AND v.session_id = ? AND v.gen = `+currentGen+` AND v.ord > ? ORDER BY v.ord LIMIT ?`, tenant, sessionID, after, limit))
}

// LogSizes returns the sizes of the log's rows after position `after`.
func (s *Store) LogSizes(ctx context.Context, tenant, sessionID string, after int64, limit int) ([]store.RowSize, error) {
	return collectSizes(reads{s}.QueryContext(ctx, `SELECT m.position, m.id, `+rowBytes+` FROM messages m
		WHERE m.tenant = ? AND m.session_id = ? AND m.position > ? ORDER BY m.position LIMIT ?`, tenant, sessionID, after, limit))
}

func collectSizes(rows *sql.Rows, err error) ([]store.RowSize, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return store.ScanRowSizes(rows)
}

// currentGen is the view generation of the session of the statement's
// first two parameters (tenant, session: ?1 and ?2; a later plain ? takes
// the next number): the only one readers see. Uncorrelated, it is read
// once per statement and the key (tenant, session_id, gen, ord) then gives
// the view in order.
const currentGen = `(SELECT view_gen FROM sessions WHERE tenant = ?1 AND id = ?2)`

// SweepViews deletes, in one short transaction, at most limit entries of
// the session's view generations other than its current one.
func (s *Store) SweepViews(ctx context.Context, tenant, sessionID string, limit int) (int, error) {
	var n int64
	err := s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		res, err := tx.(*txn).tx.ExecContext(ctx, `DELETE FROM view_entries WHERE tenant = ?1 AND session_id = ?2 AND (gen, ord) IN (SELECT v.gen, v.ord FROM view_entries v
			WHERE v.tenant = ?1 AND v.session_id = ?2 AND v.gen <> `+currentGen+` LIMIT ?3)`, tenant, sessionID, limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

// GetCompaction reads one compaction without locking anything.
func (s *Store) GetCompaction(ctx context.Context, tenant, sessionID, id string) (store.Compaction, error) {
	return scanCompaction(s.db.QueryRowContext(ctx, `SELECT `+compactionCols+` FROM compactions
		WHERE tenant = ? AND session_id = ? AND id = ?`, tenant, sessionID, id))
}
