package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// txn implements store.Tx over one pgx transaction.
type txn struct {
	tx *pipe
	// held is the tools column of the session row the transaction holds
	// (locked, or inserted), as stored.
	held heldTools
	// rows are the Store's held rows (heldrow.go), and track what this
	// transaction holds of its session once it commits; noHeld: the lock
	// is read, whatever is held (the held row was stale).
	rows   *heldRows
	track  heldTrack
	noHeld bool
	heads  headsGuard // noheads.go
}

// heldTools is the tools column of a session row a transaction holds:
// UpdateSession leaves the column out when the tools it writes are these
// (the row is locked: no one else changed them), so the row keeps its
// TOAST value — tens of KB of JSON with a coding agent's tools, written
// again by every update otherwise (docs/performance.md, the fifth pass).
// digested says the row's digest is of them at its version: when it is not
// (an older writer's row, migration 00018), the update that leaves the
// column out writes their digest.
type heldTools struct {
	tenant, id, tools string
	digested          bool
}

func (h heldTools) same(tenant, id, tools string) bool {
	return h.id != "" && h.tenant == tenant && h.id == id && h.tools == tools
}

// GetSession locks the session; with store.ReadAhead, the reads it names
// go with the lock (readahead.go).
func (t *txn) GetSession(ctx context.Context, tenant, id string) (store.Session, error) {
	var s store.Session
	var tools rowTools
	var err error
	ra := store.ReadAheadOf(ctx)
	if ra.Held && !t.noHeld {
		if s, ok := t.lockHeld(tenant, id, ra); ok {
			return s, nil
		}
	}
	if ra.Any() {
		s, tools, err = t.lockReadingAhead(ctx, tenant, id, ra)
	} else {
		hint := toolsHintOf(tenant, id)
		s, tools, err = scanSessionTools(t.tx.QueryRow(ctx, lockSession, tenant, id, hint.arg()), hint)
	}
	if err == nil {
		t.held = heldTools{tenant: tenant, id: id, tools: tools.text, digested: tools.digested}
		t.lockedAhead(tenant, id)
	}
	return s, err
}

// The places of sessionArgs' arguments a caller sets: the tools ($5) and
// their digest ($25).
const (
	argTools       = 4
	argToolsDigest = 24
)

// sessionArgs are s's columns as the statements' arguments, and its JSON
// columns' text (j.Tools is args[argTools], until a caller leaves the column out).
func sessionArgs(s *store.Session) (args []any, j store.SessionJSON, err error) {
	if j, err = store.EncodeSession(s); err != nil {
		return nil, j, err
	}
	return []any{s.Tenant, s.ID, s.Model, s.SystemPrompt, j.Tools, j.Policy, j.Labels, s.Version, s.SystemTokens,
		s.ToolsTokens, s.ActiveTokens, s.ActiveCount, s.LogCount, s.ViewSeq, s.CreatedAt, s.UpdatedAt,
		s.CompactionRound, s.AutoPausedBelow, s.ViewEpoch, s.AnchorInput, s.AnchorLocal, s.AnchorCount, s.AnchorEpoch, s.ActiveBytes,
		nil}, j, nil // $25 (argToolsDigest), the tools' digest: set by the caller that writes them (writeTools)
}

// writeTools sets args' digest ($25) to that of their tools ($5), which
// the row will carry; the replica remembers them as the row's
// (toolsdigest.go: a guess, so a transaction that then rolls back costs
// a read of the column, nothing more).
func writeTools(args []any) {
	tools := args[argTools].(string)
	digest := toolsDigest(tools)
	args[argToolsDigest] = []byte(digest)
	sawTools(args[0].(string), args[1].(string), digest, tools, true)
}

// heldDigest is the digest a held row names the tools by after an update
// of args (tools, the row's after it): the row's digest of its version,
// written now or kept (t.held's, digested, as this replica last saw them),
// whatever t.held is of; "" when the tools codec keeps no text of that
// size (toolsHintMin, toolsHintMax) or this replica saw none: the held row
// then keeps the text itself.
func heldDigest(args []any, tenant, id, tools string) string {
	if len(tools) < toolsHintMin || len(tools) > toolsHintMax {
		return ""
	}
	if d, ok := args[argToolsDigest].([]byte); ok {
		return string(d) // written now
	}
	if h := toolsHintOf(tenant, id); h.text == tools {
		return h.digest // kept
	}
	return ""
}

func (t *txn) InsertSession(ctx context.Context, s *store.Session) error {
	args, _, err := sessionArgs(s)
	if err != nil {
		return err
	}
	writeTools(args)
	// A deleted session's id is free: its archive goes now (cascading).
	if _, err := t.tx.Exec(ctx, `DELETE FROM sessions WHERE tenant = $1 AND id = $2 AND deleted_at IS NOT NULL`, s.Tenant, s.ID); err != nil {
		return err
	}
	_, err = t.tx.Exec(ctx, `INSERT INTO sessions (tenant, id, model, system_prompt, tools, policy, labels, version,
		system_tokens, tools_tokens, active_tokens, active_count, log_count, view_seq, created_at, updated_at,
		compaction_round, auto_paused_below, view_epoch, anchor_input, anchor_local, anchor_count, anchor_epoch, active_bytes, tools_digest,
		tools_digest_version)
		VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $8)`, args...)
	if isUniqueViolation(err) {
		return fmt.Errorf("session %q: %w", s.ID, store.ErrAlreadyExists)
	}
	if err == nil {
		t.held = heldTools{tenant: s.Tenant, id: s.ID, tools: args[argTools].(string), digested: true}
	}
	t.track.gone(heldKey{s.Tenant, s.ID})
	return err
}

// updateSession writes every mutable field of a live session ($1, $2);
// the tools when $5 is not NULL, and their digest when $25 is not NULL
// (always with the tools; without them when the row's digest was not of
// the tools it holds). The digest is of this version when it was written
// now or was of the row's version before (a digest an older writer left
// behind, of an older version, is of other tools: it stays of no version,
// migration 00018).
const updateSession = `UPDATE sessions SET model = $3, system_prompt = $4, tools = coalesce($5::text, tools),
		tools_digest = coalesce($25::bytea, tools_digest),
		tools_digest_version = CASE WHEN $25::bytea IS NOT NULL OR tools_digest_version = version THEN $8::bigint END, policy = $6,
		labels = $7::jsonb, version = $8, system_tokens = $9, tools_tokens = $10, active_tokens = $11,
		active_count = $12, log_count = $13, view_seq = $14, updated_at = $16, compaction_round = $17,
		auto_paused_below = $18, view_epoch = $19, anchor_input = $20, anchor_local = $21, anchor_count = $22,
		anchor_epoch = $23, active_bytes = $24 WHERE tenant = $1 AND id = $2 AND deleted_at IS NULL AND $15::timestamptz IS NOT NULL`

func (t *txn) UpdateSession(ctx context.Context, s *store.Session) error {
	args, j, err := sessionArgs(s)
	if err != nil {
		return err
	}
	tools := j.Tools
	if t.held.same(s.Tenant, s.ID, tools) {
		if !t.held.digested {
			writeTools(args) // the digest of the tools the locked row holds
			t.held.digested = true
		}
		args[argTools] = nil // unchanged: the column keeps its value (heldTools)
	} else {
		writeTools(args)
		if t.held.tenant == s.Tenant && t.held.id == s.ID {
			t.held.tools, t.held.digested = tools, true
		}
	}
	t.track.updated(s, j, heldDigest(args, s.Tenant, s.ID, tools))
	notFound := fmt.Errorf("session %q: %w", s.ID, store.ErrNotFound)
	if store.IsPipelined(ctx) {
		// Queued, it may go in one pipeline with COMMIT: the server
		// itself must fail the transaction when no row was updated (a
		// count checked here would come after the commit), so the
		// statement divides by the count of rows it updated.
		return t.write(ctx, func(_ pgconn.CommandTag, err error) error {
			if isDivisionByZero(err) {
				return notFound
			}
			return err
		}, `WITH u AS (`+updateSession+` RETURNING 1) SELECT 1 / count(*) FROM u`, args...)
	}
	tag, err := t.tx.Exec(ctx, updateSession, args...)
	if err == nil && tag.RowsAffected() == 0 {
		return notFound
	}
	return err
}

func (t *txn) DeleteSession(ctx context.Context, tenant, id string) error {
	t.track.gone(heldKey{tenant, id})
	tag, err := t.tx.Exec(ctx, `UPDATE sessions SET deleted_at = now(), version = version + 1
		WHERE tenant = $1 AND id = $2 AND deleted_at IS NULL`, tenant, id)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("session %q: %w", id, store.ErrNotFound)
	}
	return nil
}

func (t *txn) DeleteUnusedSession(ctx context.Context, tenant, id string, created time.Time) (bool, error) {
	t.track.gone(heldKey{tenant, id})
	tag, err := t.tx.Exec(ctx, `UPDATE sessions SET deleted_at = now(), version = version + 1
		WHERE tenant = $1 AND id = $2 AND deleted_at IS NULL AND version = 1 AND log_count = 0 AND created_at = $3`,
		tenant, id, created)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

func (t *txn) DeleteSessionAt(ctx context.Context, tenant, id string, created time.Time, version int64) (bool, error) {
	t.track.gone(heldKey{tenant, id})
	tag, err := t.tx.Exec(ctx, `UPDATE sessions SET deleted_at = now(), version = version + 1
		WHERE tenant = $1 AND id = $2 AND deleted_at IS NULL AND version = $4 AND created_at = $3
		AND NOT EXISTS (SELECT 1 FROM session_ledger l WHERE l.tenant = sessions.tenant AND l.session_id = sessions.id)
		AND NOT EXISTS (SELECT 1 FROM compactions c WHERE c.tenant = sessions.tenant AND c.session_id = sessions.id)
		AND NOT EXISTS (SELECT 1 FROM compaction_jobs j WHERE j.tenant = sessions.tenant AND j.session_id = sessions.id)`,
		tenant, id, created, version)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

func (t *txn) InsertMessages(ctx context.Context, tenant, sessionID string, msgs []chat.Message) error {
	return t.insertMessages(ctx, tenant, sessionID, msgs, nil)
}

// insertMessages inserts msgs; a message with a shared body (refs[i].id
// set; refs may be nil) is stored without its parts (fork.go).
func (t *txn) insertMessages(ctx context.Context, tenant, sessionID string, msgs []chat.Message, refs []store.SharedBody) error {
	n := len(msgs)
	bodySessions, bodyIDs, bodyBytes := make([]*string, n), make([]*string, n), make([]int64, n)
	ids, roles, kinds, names, parts, metas := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	replaces := make([]string, n)
	countedFor := make([]*string, n) // NULL when unknown
	positions, tokens := make([]int64, n), make([]int64, n)
	pinned := make([]bool, n)
	created := make([]any, n)
	for i, m := range msgs {
		p, err := store.PartsArg(&msgs[i], refs, i)
		if err != nil {
			return err
		}
		if refs != nil && refs[i].ID != "" {
			bodySessions[i], bodyIDs[i], bodyBytes[i] = &refs[i].SessionID, &refs[i].ID, refs[i].Bytes
		}
		md, err := store.EncodeJSON(m.Metadata)
		if err != nil {
			return err
		}
		if replaces[i], err = store.EncodeIDs(m.Replaces); err != nil {
			return err
		}
		ids[i], positions[i], roles[i], kinds[i], names[i] = m.ID, m.Position, string(m.Role), string(m.Kind), m.Name
		pinned[i], parts[i], metas[i], tokens[i], created[i] = m.Pinned, p, md, m.Tokens, m.CreatedAt
		if m.CountedFor != "" {
			countedFor[i] = &msgs[i].CountedFor
		}
	}
	// The messages and their history entries go in one round trip (a
	// pipelined batch: the insert, then the index's head moved and its
	// entries added), not three; the first error is the batch's.
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO messages (tenant, session_id, id, position, role, kind, name, pinned, parts, metadata, tokens, created_at, replaces, counted_for,
		body_session, body_id, body_bytes)
		SELECT $1, $2, * FROM unnest($3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::boolean[], $9::text[], $10::text[], $11::bigint[], $12::timestamptz[], $13::text[], $14::text[],
		$15::text[], $16::text[], $17::bigint[])`,
		tenant, sessionID, ids, positions, roles, kinds, names, pinned, parts, metas, tokens, created, replaces, countedFor,
		bodySessions, bodyIDs, bodyBytes)
	queueHistory(b, tenant, sessionID, store.HistoryEntries(msgs))
	return t.writeBatch(ctx, b, func(err error) error {
		if isUniqueViolation(err) {
			return fmt.Errorf("message: %w", store.ErrAlreadyExists)
		}
		return err
	})
}

// runBatch reads the results of a batch of n statements that return no
// rows and closes it: the first error.
func runBatch(br pgx.BatchResults, n int) error {
	for range n {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return err
		}
	}
	return br.Close()
}

func (t *txn) AppendView(ctx context.Context, tenant, sessionID string, entries []store.ViewEntry) error {
	ords, ids := make([]int64, len(entries)), make([]string, len(entries))
	for i, e := range entries {
		ords[i], ids[i] = e.Ord, e.MessageID
	}
	return t.write(ctx, nil, `INSERT INTO view_entries (tenant, session_id, gen, ord, message_id)
		SELECT $1, $2, coalesce((SELECT view_gen FROM sessions WHERE tenant = $1 AND id = $2), 0), * FROM unnest($3::bigint[], $4::text[])`,
		tenant, sessionID, ords, ids)
}

// StageView writes entries into generation gen.
func (t *txn) StageView(ctx context.Context, tenant, sessionID string, gen int64, entries []store.ViewEntry) error {
	ords, ids := make([]int64, len(entries)), make([]string, len(entries))
	for i, e := range entries {
		ords[i], ids[i] = e.Ord, e.MessageID
	}
	return t.write(ctx, nil, `INSERT INTO view_entries (tenant, session_id, gen, ord, message_id)
		SELECT $1, $2, $3, * FROM unnest($4::bigint[], $5::text[])`, tenant, sessionID, gen, ords, ids)
}

// FlipView makes gen the session's view if it holds count entries.
func (t *txn) FlipView(ctx context.Context, tenant, sessionID string, gen int64, count int) error {
	var n int
	if err := t.tx.QueryRow(ctx, `SELECT count(*) FROM view_entries WHERE tenant = $1 AND session_id = $2 AND gen = $3`,
		tenant, sessionID, gen).Scan(&n); err != nil {
		return err
	}
	if n != count {
		return fmt.Errorf("view generation %d holds %d of %d entries: %w", gen, n, count, store.ErrVersionConflict)
	}
	return t.write(ctx, nil, `UPDATE sessions SET view_gen = $3 WHERE tenant = $1 AND id = $2`, tenant, sessionID, gen)
}

func (t *txn) ToolCalls(ctx context.Context, tenant, sessionID string, ids []string) (map[string]store.ToolCall, error) {
	out := make(map[string]store.ToolCall, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	if known, ok := t.guessToolCalls(ctx, tenant, sessionID, ids); ok {
		return known, nil // checked by the server with the writes (knowncalls.go)
	}
	rows, err := t.tx.Query(ctx, `SELECT call_id, position, result_position FROM tool_calls
		WHERE tenant = $1 AND session_id = $2 AND call_id = ANY($3)`, tenant, sessionID, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var c store.ToolCall
		if err := rows.Scan(&c.CallID, &c.Position, &c.ResultPosition); err != nil {
			return nil, err
		}
		out[c.CallID] = c
	}
	return out, rows.Err()
}

func (t *txn) OpenToolCalls(ctx context.Context, tenant, sessionID string) ([]store.ToolCall, error) {
	if calls, ok := t.aheadCalls(tenant, sessionID); ok {
		return calls, nil
	}
	rows, err := t.tx.Query(ctx, openCalls, tenant, sessionID)
	if err != nil {
		return nil, err
	}
	return scanOpenCalls(rows)
}

func (t *txn) PutToolCalls(ctx context.Context, tenant, sessionID string, calls []store.ToolCall) error {
	t.track.putCalls(heldKey{tenant, sessionID}, calls)
	ids, pos, res := make([]string, len(calls)), make([]int64, len(calls)), make([]int64, len(calls))
	for i, c := range calls {
		ids[i], pos[i], res[i] = c.CallID, c.Position, c.ResultPosition
	}
	return t.write(ctx, nil, `INSERT INTO tool_calls (tenant, session_id, call_id, position, result_position)
		SELECT $1, $2, * FROM unnest($3::text[], $4::bigint[], $5::bigint[])
		ON CONFLICT (tenant, session_id, call_id) DO UPDATE SET position = excluded.position, result_position = excluded.result_position`,
		tenant, sessionID, ids, pos, res)
}

func (t *txn) GetIdempotency(ctx context.Context, tenant, sessionID, key string) (store.Idempotency, error) {
	rec := store.Idempotency{Key: key}
	err := t.tx.QueryRow(ctx, `SELECT request_hash, response FROM idempotency_keys
		WHERE tenant = $1 AND session_id = $2 AND key = $3`, tenant, sessionID, key).Scan(&rec.RequestHash, &rec.Response)
	if errors.Is(err, pgx.ErrNoRows) {
		return rec, store.ErrNotFound
	}
	return rec, err
}

func (t *txn) PutIdempotency(ctx context.Context, tenant, sessionID string, rec store.Idempotency) error {
	return t.writeAside(ctx, func(_ pgconn.CommandTag, err error) error {
		if isUniqueViolation(err) {
			return fmt.Errorf("idempotency key: %w", store.ErrAlreadyExists)
		}
		return err
	}, `INSERT INTO idempotency_keys (tenant, session_id, key, request_hash, response)
		VALUES ($1, $2, $3, $4, $5)`, tenant, sessionID, rec.Key, rec.RequestHash, rec.Response)
}

func (t *txn) LockCompaction(ctx context.Context, tenant, sessionID string) error {
	_, err := t.tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1 || '/' || $2, 0))`, tenant, sessionID)
	return err
}

func (t *txn) ViewMessages(ctx context.Context, tenant, sessionID string) ([]chat.Message, error) {
	return collectMessages(t.tx.Query(ctx, `SELECT `+messageCols+`
		FROM `+viewMessages+`
		WHERE v.tenant = $1 AND v.session_id = $2 AND v.gen = `+currentGen+` ORDER BY v.ord`, tenant, sessionID))
}

// SetMessageTokens implements store.Tx.
func (t *txn) SetMessageTokens(ctx context.Context, tenant, sessionID string, tokens map[string]int64, countedFor string) error {
	for id, n := range tokens {
		tag, err := t.tx.Exec(ctx, `UPDATE messages SET tokens = $1, counted_for = NULLIF($2, '') WHERE tenant = $3 AND session_id = $4 AND id = $5`,
			n, countedFor, tenant, sessionID, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("message %q: %w", id, store.ErrNotFound)
		}
	}
	return nil
}

// ReplaceView writes ids as a new generation and makes it the session's;
// the old generation's rows are left to SweepViews.
func (t *txn) ReplaceView(ctx context.Context, tenant, sessionID string, ids []string) error {
	gen := store.NewViewGen()
	if err := t.StageView(ctx, tenant, sessionID, gen, store.Entries(ids, 0)); err != nil {
		return err
	}
	return t.FlipView(ctx, tenant, sessionID, gen, len(ids))
}

func (t *txn) MessagesByID(ctx context.Context, tenant, sessionID string, ids []string) ([]chat.Message, error) {
	return messagesByID(ctx, t.tx, tenant, sessionID, ids)
}

func (t *txn) InsertCompaction(ctx context.Context, tenant, sessionID string, c *store.Compaction) error {
	j, err := store.EncodeCompaction(c)
	if err != nil {
		return err
	}
	return t.write(ctx, func(_ pgconn.CommandTag, err error) error {
		if isUniqueViolation(err) {
			return fmt.Errorf("compaction %q: %w", c.ID, store.ErrAlreadyExists)
		}
		return err
	}, `INSERT INTO compactions (tenant, session_id, `+compactionCols+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`, tenant, sessionID, c.ID, c.Round,
		j.Tiers, c.TokensBefore, c.TokensAfter, j.Items, c.Summary, j.ViewBefore, j.ViewAfter, c.CreatedAt, c.ExpiresAt, c.RevertedAt)
}

func (t *txn) GetCompaction(ctx context.Context, tenant, sessionID, id string) (store.Compaction, error) {
	return scanCompaction(t.tx.QueryRow(ctx, `SELECT `+compactionCols+` FROM compactions
		WHERE tenant = $1 AND session_id = $2 AND id = $3`, tenant, sessionID, id))
}

func (t *txn) MarkReverted(ctx context.Context, tenant, sessionID, id string, at time.Time) error {
	_, err := t.tx.Exec(ctx, `UPDATE compactions SET reverted_at = $4 WHERE tenant = $1 AND session_id = $2 AND id = $3`,
		tenant, sessionID, id, at)
	return err
}

// GetCalibration locks the (tenant, model) calibration until the
// transaction ends, row or no row yet (a transaction-scoped advisory lock):
// concurrent reports read-modify-write it one after the other, so no sample
// is lost.
//
// The lock and the read go in one round trip, with what is queued: two
// statements of one pipeline, so the read (a snapshot of its own, READ
// COMMITTED) runs once the lock is granted and sees the last holder's
// write.
func (t *txn) GetCalibration(ctx context.Context, tenant, model string) (store.Calibration, error) {
	b := &pgx.Batch{}
	b.Queue(`SELECT pg_advisory_xact_lock(hashtextextended('calibration/' || $1 || '/' || $2, 0))`, tenant, model)
	b.Queue(calibrationRow, tenant, model)
	br := t.tx.sendBatch(ctx, b) // a lock and a read: nothing read ahead changes
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return store.Calibration{}, err
	}
	c, err := scanCalibration(br.QueryRow(), model)
	if cerr := br.Close(); err == nil || (errors.Is(err, store.ErrNotFound) && cerr != nil) {
		err = cerr
	}
	return c, err
}

// PutCalibration writes a calibration (queued in a store.Pipelined
// transaction: its upsert fails on nothing but the database).
func (t *txn) PutCalibration(ctx context.Context, tenant string, c store.Calibration) error {
	return t.writeAside(ctx, nil, `INSERT INTO calibrations (tenant, model, ratio, samples, updated_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (tenant, model) DO UPDATE SET ratio = excluded.ratio, samples = excluded.samples, updated_at = excluded.updated_at`,
		tenant, c.Model, c.Ratio, c.Samples, c.UpdatedAt)
}

// CountSessions takes a transaction-scoped lock on the tenant's session
// count first: under READ COMMITTED two creates would otherwise both count
// below the quota and both insert. Creates of one tenant with a quota
// serialize here, until their transactions end.
func (t *txn) CountSessions(ctx context.Context, tenant string) (int, error) {
	if _, err := t.tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('session-count/' || $1, 0))`, tenant); err != nil {
		return 0, err
	}
	var n int
	err := t.tx.QueryRow(ctx, `SELECT count(*) FROM sessions WHERE tenant = $1 AND deleted_at IS NULL`, tenant).Scan(&n)
	return n, err
}

// LogBytes reads the tenant's count (migration 00012's triggers keep it)
// and locks it until the transaction ends.
func (t *txn) LogBytes(ctx context.Context, tenant string) (int64, error) {
	var n int64
	err := t.tx.QueryRow(ctx, `SELECT log_bytes FROM tenant_usage WHERE tenant = $1 FOR UPDATE`, tenant).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

// CheckLogBytes implements store.Tx: a statement that fails on the server
// (division by zero) when the count is over quota, so that, queued, it can
// go in one pipeline with COMMIT (UpdateSession does the same). It holds
// the count as LogBytes does.
func (t *txn) CheckLogBytes(ctx context.Context, tenant string, quota int64, over error) error {
	return t.writeAside(ctx, func(_ pgconn.CommandTag, err error) error {
		if isDivisionByZero(err) {
			return over
		}
		return err
	}, `SELECT 1 / (CASE WHEN log_bytes > $2 THEN 0 ELSE 1 END) FROM tenant_usage WHERE tenant = $1 FOR UPDATE`, tenant, quota)
}

// isDivisionByZero: a statement made to fail on the server did.
func isDivisionByZero(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "22012" // division_by_zero
}

// Notify sends a notification on channel that PostgreSQL delivers when the
// transaction commits, and never if it rolls back (store.TxNotifier).
func (t *txn) Notify(ctx context.Context, channel, payload string) error {
	return t.writeAside(ctx, nil, "SELECT pg_notify($1, $2)", channel, payload)
}
