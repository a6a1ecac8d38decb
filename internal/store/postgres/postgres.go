// Package postgres is the PostgreSQL store: a pgx/v5 pool, one transaction
// per change, row locks that serialize writers of one session, and the
// migrations applied at open under an advisory lock.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/migrations"
)

// Store is the PostgreSQL store.
type Store struct {
	pool *pgxpool.Pool
	rows heldRows // held rows: heldrow.go
}

var _ store.Store = (*Store)(nil)

// Open connects to url (a libpq URL or DSN), applies pending migrations and
// returns the store.
func Open(ctx context.Context, url string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("database url: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect: %w", err)
	}
	if _, err := Migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return &Store{pool: pool}, nil
}

// Migrate applies pending migrations through pool and returns how many ran.
func Migrate(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	return migrations.UpPostgres(ctx, db)
}

// Pool exposes the pool (for LISTEN/NOTIFY and tests).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Ping checks the connection.
func (s *Store) Ping(ctx context.Context) (err error) {
	defer unavailable(&err)
	return s.pool.Ping(ctx)
}

// Close closes the pool.
func (s *Store) Close() error { s.pool.Close(); return nil }

// InTx runs fn in one transaction.
func (s *Store) InTx(ctx context.Context, fn func(context.Context, store.Tx) error) (err error) {
	defer unavailable(&err)
	return runTx(ctx, s, fn) // heldrow.go, pipeline.go
}

// sessionCols are a session row's columns, read by a statement whose $1
// and $2 are the tenant and the id and whose $3 is the digest of the tools
// the reader holds (toolsdigest.go): the tools column is NULL when the
// row's digest is that one and of the row's version, and the row's digest
// comes last (NULL when it is not of the row's version).
const sessionCols = `tenant, id, model, system_prompt,
	CASE WHEN tools_digest = $3::bytea AND tools_digest_version = version THEN NULL ELSE tools END, policy, labels::text, version, system_tokens,
	tools_tokens, active_tokens, active_count, log_count, view_seq, created_at, updated_at, compaction_round, auto_paused_below,
	view_epoch, anchor_input, anchor_local, anchor_count, anchor_epoch, active_bytes,
	CASE WHEN tools_digest_version = version THEN tools_digest END`

// messageCols are a message row's columns (the row is m). A fork's row
// that shares its parts (migration 00013) reads them from the row it
// names: a probe by primary key, made only for such rows.
const messageCols = `m.id, m.position, m.role, m.kind, m.name, m.pinned, ` + partsOf + `, m.metadata, m.tokens, m.created_at, m.replaces, m.counted_for`

// partsOf is row m's parts, its own or those of the row it shares.
const partsOf = `CASE WHEN m.body_session IS NULL THEN m.parts ELSE (SELECT b.parts FROM messages b
	WHERE b.tenant = m.tenant AND b.session_id = m.body_session AND b.id = m.body_id) END`

const compactionCols = `id, round, tiers, tokens_before, tokens_after, items, summary, view_before, view_after, created_at, expires_at, reverted_at`

// scanSession reads a row of sessionCols that was read with hint's digest
// as $3.
func scanSession(row pgx.Row, hint toolsHint) (store.Session, error) {
	s, _, err := scanSessionTools(row, hint)
	return s, err
}

// rowTools is a session row's tools column's text as stored, and whether
// the row's digest is of them (of the row's version: migration 00018).
type rowTools struct {
	text     string
	digested bool
}

// scanSessionTools is scanSession, and the tools column as stored.
func scanSessionTools(row pgx.Row, hint toolsHint) (s store.Session, tools rowTools, err error) {
	var policy, labels string
	var sent *string
	var digest []byte
	err = row.Scan(&s.Tenant, &s.ID, &s.Model, &s.SystemPrompt, &sent, &policy, &labels, &s.Version,
		&s.SystemTokens, &s.ToolsTokens, &s.ActiveTokens, &s.ActiveCount, &s.LogCount, &s.ViewSeq,
		&s.CreatedAt, &s.UpdatedAt, &s.CompactionRound, &s.AutoPausedBelow,
		&s.ViewEpoch, &s.AnchorInput, &s.AnchorLocal, &s.AnchorCount, &s.AnchorEpoch, &s.ActiveBytes, &digest)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, rowTools{}, store.ErrNotFound
	}
	if err != nil {
		return s, rowTools{}, err
	}
	switch {
	case sent != nil:
		tools = rowTools{text: *sent, digested: digest != nil}
		sawTools(s.Tenant, s.ID, string(digest), tools.text, false)
	case hint.digest != "" && hint.digest == string(digest):
		tools = rowTools{text: hint.text, digested: true} // the row's digest is the hint's: the server left the column out
	default:
		return s, rowTools{}, fmt.Errorf("session %q: its tools were left out for a digest the reader does not hold", s.ID)
	}
	s.CreatedAt, s.UpdatedAt = s.CreatedAt.UTC(), s.UpdatedAt.UTC()
	return s, tools, store.SessionJSON{Tools: tools.text, Policy: policy, Labels: labels}.DecodeInto(&s)
}

func scanMessage(rows pgx.Rows, extra ...any) (chat.Message, error) {
	var m chat.Message
	var role, kind, parts, metadata, replaces string
	var countedFor *string
	dest := append(extra, &m.ID, &m.Position, &role, &kind, &m.Name, &m.Pinned, &parts, &metadata, &m.Tokens, &m.CreatedAt, &replaces, &countedFor)
	if err := rows.Scan(dest...); err != nil {
		return m, err
	}
	if countedFor != nil {
		m.CountedFor = *countedFor
	}
	var err error
	if m.Replaces, err = store.DecodeIDs(replaces); err != nil {
		return m, err
	}
	m.Role, m.Kind, m.CreatedAt = chat.Role(role), chat.Kind(kind), m.CreatedAt.UTC()
	if err := store.DecodeJSON(parts, &m.Parts); err != nil {
		return m, err
	}
	m.Metadata, err = store.DecodeStringMap(metadata)
	return m, err
}

// getSession reads a live session's row (sessionCols' $1, $2, $3): the
// pool's GetSession, the match's FindHistoryAndSession, and with FOR UPDATE
// the lock (lockSession).
const getSession = `SELECT ` + sessionCols + ` FROM sessions WHERE tenant = $1 AND id = $2 AND deleted_at IS NULL`

// GetSession reads a session without locking.
func (s *Store) GetSession(ctx context.Context, tenant, id string) (_ store.Session, err error) {
	defer unavailable(&err)
	hint := toolsHintOf(tenant, id)
	row, err := scanSession(s.pool.QueryRow(ctx, getSession, tenant, id, hint.arg()), hint)
	s.rows.seen(heldKey{tenant, id}, row, err)
	return row, err
}

// summaryCols are sessionCols of the table aliased s, with the system
// prompt and tools left out (a listing never reads them).
const summaryCols = `s.tenant, s.id, s.model, ''::text, '[]'::text, s.policy, s.labels::text, s.version, s.system_tokens,
	s.tools_tokens, s.active_tokens, s.active_count, s.log_count, s.view_seq, s.created_at, s.updated_at, s.compaction_round,
	s.auto_paused_below, s.view_epoch, s.anchor_input, s.anchor_local, s.anchor_count, s.anchor_epoch, s.active_bytes, NULL::bytea` + store.SummaryExtraCols

// ListSessions returns session summaries newest first.
func (s *Store) ListSessions(ctx context.Context, tenant string, f store.ListFilter) (_ []store.SessionSummary, err error) {
	defer unavailable(&err)
	labels, err := store.EncodeJSON(f.Labels)
	if err != nil {
		return nil, err
	}
	var beforeAt *time.Time
	var beforeID string
	if f.Before != nil {
		beforeAt, beforeID = &f.Before.CreatedAt, f.Before.ID
	}
	args := []any{tenant, labels, beforeAt, beforeID, f.Limit}
	byID := ""
	if f.ID != "" { // one session's row: a primary-key lookup, never a scan of the tenant
		byID = ` AND s.id = $6`
		args = append(args, f.ID)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+summaryCols+store.SummaryJoins+`
		WHERE s.tenant = $1 AND s.deleted_at IS NULL AND s.labels @> $2::jsonb
		  AND ($3::timestamptz IS NULL OR (s.created_at, s.id) < ($3, $4))`+byID+`
		ORDER BY s.created_at DESC, s.id DESC LIMIT $5`, args...)
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
func scanSummary(rows pgx.Rows) (store.SessionSummary, error) {
	var r store.SessionSummary
	var cid, tiers *string
	var round *int
	var before, after *int64
	var created, expires, reverted *time.Time
	extra := append([]any{&cid, &round, &tiers, &before, &after, &created, &expires, &reverted}, r.LedgerDest()...)
	sess, err := scanSession(multiScanner{rows, extra}, toolsHint{})
	if err != nil {
		return r, err
	}
	r.Session = sess
	if cid != nil {
		c := &store.Compaction{ID: *cid, Round: *round, TokensBefore: *before, TokensAfter: *after,
			CreatedAt: created.UTC(), ExpiresAt: expires.UTC()}
		if reverted != nil {
			t := reverted.UTC()
			c.RevertedAt = &t
		}
		if err := store.DecodeJSON(*tiers, &c.Tiers); err != nil {
			return r, err
		}
		r.LastCompaction = c
	}
	return r, nil
}

// multiScanner scans a row into a session's columns and then extra.
type multiScanner struct {
	row   pgx.Row
	extra []any
}

func (m multiScanner) Scan(dest ...any) error { return m.row.Scan(append(dest, m.extra...)...) }

// ActiveMessages returns the active view after ordinal `after`.
func (s *Store) ActiveMessages(ctx context.Context, tenant, sessionID string, after int64, limit int) (_ []chat.Message, _ []int64, err error) {
	defer unavailable(&err)
	rows, err := s.pool.Query(ctx, activeMessages, tenant, sessionID, after, limit)
	if err != nil {
		return nil, nil, err
	}
	return scanActive(rows)
}

// activeMessages reads a page of a session's active view ($1, $2) after
// ordinal $3, at most $4 messages.
const activeMessages = `SELECT v.ord, ` + messageCols + `
		FROM ` + viewMessages + `
		WHERE v.tenant = $1 AND v.session_id = $2 AND v.gen = ` + currentGen + ` AND v.ord > $3 ORDER BY v.ord LIMIT $4`

func scanActive(rows pgx.Rows) ([]chat.Message, []int64, error) {
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
func (s *Store) LogMessages(ctx context.Context, tenant, sessionID string, after int64, limit int) (_ []chat.Message, err error) {
	defer unavailable(&err)
	return collectMessages(s.pool.Query(ctx, `SELECT `+messageCols+` FROM messages m
		WHERE m.tenant = $1 AND m.session_id = $2 AND m.position > $3 ORDER BY m.position LIMIT $4`, tenant, sessionID, after, limit))
}

func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

// MessagesByID returns messages by id, in the order given.
func (s *Store) MessagesByID(ctx context.Context, tenant, sessionID string, ids []string) (_ []chat.Message, err error) {
	defer unavailable(&err)
	return messagesByID(ctx, s.pool, tenant, sessionID, ids)
}

// querier is what the pool and a transaction share.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func collectMessages(rows pgx.Rows, err error) ([]chat.Message, error) {
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
	// One primary-key lookup an id (as viewMessages): with young tables'
	// statistics, id = ANY($3) was planned as a scan of all of the
	// session's messages for every call.
	msgs, err := collectMessages(q.Query(ctx, `SELECT `+messageCols+` FROM (SELECT DISTINCT id FROM unnest($3::text[]) AS u(id)) want CROSS JOIN LATERAL (SELECT *
		FROM messages WHERE tenant = $1 AND session_id = $2 AND id = want.id OFFSET 0) m`, tenant, sessionID, ids))
	if err != nil {
		return nil, err
	}
	return store.OrderByIDs(msgs, ids)
}

func scanCompaction(row pgx.Row) (store.Compaction, error) {
	var c store.Compaction
	var j store.CompactionJSON
	err := row.Scan(&c.ID, &c.Round, &j.Tiers, &c.TokensBefore, &c.TokensAfter, &j.Items, &c.Summary,
		&j.ViewBefore, &j.ViewAfter, &c.CreatedAt, &c.ExpiresAt, &c.RevertedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, store.ErrNotFound
	}
	if err != nil {
		return c, err
	}
	c.CreatedAt, c.ExpiresAt = c.CreatedAt.UTC(), c.ExpiresAt.UTC()
	if c.RevertedAt != nil {
		t := c.RevertedAt.UTC()
		c.RevertedAt = &t
	}
	return c, j.DecodeInto(&c)
}

// ListCompactions returns a page of a session's compactions in round order,
// read through the index compactions_by_round.
func (s *Store) ListCompactions(ctx context.Context, tenant, sessionID string, afterRound, limit int) (_ []store.Compaction, err error) {
	defer unavailable(&err)
	rows, err := s.pool.Query(ctx, `SELECT `+compactionCols+` FROM compactions
		WHERE tenant = $1 AND session_id = $2 AND round > $3
		ORDER BY round LIMIT $4`, tenant, sessionID, afterRound, limit)
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

const calibrationRow = `SELECT ratio, samples, updated_at FROM calibrations WHERE tenant = $1 AND model = $2`

func getCalibration(ctx context.Context, q querier, tenant, model string) (store.Calibration, error) {
	return scanCalibration(q.QueryRow(ctx, calibrationRow, tenant, model), model)
}

func scanCalibration(row pgx.Row, model string) (store.Calibration, error) {
	c := store.Calibration{Model: model}
	err := row.Scan(&c.Ratio, &c.Samples, &c.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, store.ErrNotFound
	}
	c.UpdatedAt = c.UpdatedAt.UTC()
	return c, err
}

// GetCalibration returns a model's calibration.
func (s *Store) GetCalibration(ctx context.Context, tenant, model string) (_ store.Calibration, err error) {
	defer unavailable(&err)
	return getCalibration(ctx, s.pool, tenant, model)
}

// LatestCompaction returns a session's newest compaction.
func (s *Store) LatestCompaction(ctx context.Context, tenant, sessionID string) (_ store.Compaction, err error) {
	defer unavailable(&err)
	return scanCompaction(s.pool.QueryRow(ctx, `SELECT `+compactionCols+` FROM compactions
		WHERE tenant = $1 AND session_id = $2 ORDER BY round DESC LIMIT 1`, tenant, sessionID))
}

// rowBytes is a message row's stored size; octet_length of a TOASTed value
// reads its header, not the value.
// A fork's row that shares its parts adds their size (body_bytes).
const rowBytes = `octet_length(m.parts) + m.body_bytes + octet_length(m.metadata) + octet_length(m.replaces) + octet_length(m.id)`

// ActiveSizes returns the sizes of the active view's rows after ordinal
// `after`.
func (s *Store) ActiveSizes(ctx context.Context, tenant, sessionID string, after int64, limit int) (_ []store.RowSize, err error) {
	defer unavailable(&err)
	return collectSizes(s.pool.Query(ctx, `SELECT v.ord, m.id, `+rowBytes+`
		FROM `+viewMessages+`
		WHERE v.tenant = $1 AND v.session_id = $2 AND v.gen = `+currentGen+` AND v.ord > $3 ORDER BY v.ord LIMIT $4`, tenant, sessionID, after, limit))
}

// LogSizes returns the sizes of the log's rows after position `after`.
func (s *Store) LogSizes(ctx context.Context, tenant, sessionID string, after int64, limit int) (_ []store.RowSize, err error) {
	defer unavailable(&err)
	return collectSizes(s.pool.Query(ctx, `SELECT m.position, m.id, `+rowBytes+` FROM messages m
		WHERE m.tenant = $1 AND m.session_id = $2 AND m.position > $3 ORDER BY m.position LIMIT $4`, tenant, sessionID, after, limit))
}

func collectSizes(rows pgx.Rows, err error) ([]store.RowSize, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return store.ScanRowSizes(rows)
}

// viewMessages joins the view's entries (v) to their messages (m), one
// primary-key lookup an entry. A plain join let the planner, with the
// statistics of young tables (an estimate of one row), scan all of the
// session's messages for every entry: 382 ms for a page of 1,000 of a
// 5,000-message view, 5 ms this way.
const viewMessages = `view_entries v CROSS JOIN LATERAL (SELECT * FROM messages m
	WHERE m.tenant = v.tenant AND m.session_id = v.session_id AND m.id = v.message_id OFFSET 0) m`

// currentGen is the view generation of the session ($1, $2): the only one
// readers see. Uncorrelated, it is read once per statement and the key
// (tenant, session_id, gen, ord) then gives the view in order (correlated
// with each row, a 5,000-message view took 34 s to read a page at a time).
const currentGen = `(SELECT view_gen FROM sessions WHERE tenant = $1 AND id = $2)`

// SweepViews deletes, in one short transaction, at most limit entries of
// the session's view generations other than its current one.
//
// The current generation is read holding the session's row (FOR SHARE),
// to the end of the sweep: a flip commits under that row's lock, so read
// without it, a flip open meanwhile was not seen and the generation it was
// making the session's view was swept as garbage (conformance
// SweepDuringFlip: the view was left empty). A session no longer stored
// has only garbage.
func (s *Store) SweepViews(ctx context.Context, tenant, sessionID string, limit int) (n int, err error) {
	defer unavailable(&err)
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		cur := int64(-1)
		err := tx.QueryRow(ctx, `SELECT view_gen FROM sessions WHERE tenant = $1 AND id = $2 FOR SHARE`, tenant, sessionID).Scan(&cur)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		// The rows by ctid (a TID scan): matching the whole key against a
		// correlated subquery made each batch a nested loop over the
		// session's rows (52 s to sweep 20,000).
		tag, err := tx.Exec(ctx, `DELETE FROM view_entries WHERE ctid = ANY (ARRAY(SELECT v.ctid FROM view_entries v
			WHERE v.tenant = $1 AND v.session_id = $2 AND v.gen <> $3 LIMIT $4))`, tenant, sessionID, cur, limit)
		n = int(tag.RowsAffected())
		return err
	})
	return n, err
}

// GetCompaction reads one compaction without locking anything.
func (s *Store) GetCompaction(ctx context.Context, tenant, sessionID, id string) (_ store.Compaction, err error) {
	defer unavailable(&err)
	return scanCompaction(s.pool.QueryRow(ctx, `SELECT `+compactionCols+` FROM compactions
		WHERE tenant = $1 AND session_id = $2 AND id = $3`, tenant, sessionID, id))
}
