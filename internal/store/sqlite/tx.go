package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// txn implements store.Tx over one IMMEDIATE transaction, which already
// holds the write lock: GetSession needs no row lock.
type txn struct {
	tx querier // the group's transaction, uncancelled (groupcommit.go)
	// logCheck is a CheckLogBytes not yet made (logcheck.go).
	logCheck *logCheck
	// openCalls is the open tool calls' count of each session this call
	// read, while it wrote none of their calls (opencalls.go).
	openCalls map[sessionKey]int64
}

func sessionArgs(s *store.Session) ([]any, error) {
	j, err := store.EncodeSession(s)
	if err != nil {
		return nil, err
	}
	tools, policy, labels := j.Tools, j.Policy, j.Labels
	return []any{s.Model, s.SystemPrompt, tools, policy, labels, s.Version, s.SystemTokens, s.ToolsTokens,
		s.ActiveTokens, s.ActiveCount, s.LogCount, s.ViewSeq, s.CompactionRound, s.AutoPausedBelow,
		s.ViewEpoch, s.AnchorInput, s.AnchorLocal, s.AnchorCount, s.AnchorEpoch, s.ActiveBytes,
		s.UpdatedAt.UnixNano(), s.Tenant, s.ID}, nil
}

func (t *txn) InsertSession(ctx context.Context, s *store.Session) error {
	args, err := sessionArgs(s)
	if err != nil {
		return err
	}
	// A deleted session's id is free: its archive goes now (cascading).
	t.callsWritten(s.Tenant, s.ID)
	if _, err := t.tx.ExecContext(ctx, `DELETE FROM sessions WHERE tenant = ? AND id = ? AND deleted_at IS NOT NULL`, s.Tenant, s.ID); err != nil {
		return err
	}
	_, err = t.tx.ExecContext(ctx, `INSERT INTO sessions (model, system_prompt, tools, policy, labels, version,
		system_tokens, tools_tokens, active_tokens, active_count, log_count, view_seq, compaction_round,
		auto_paused_below, view_epoch, anchor_input, anchor_local, anchor_count, anchor_epoch, active_bytes, updated_at, tenant, id, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, append(args, s.CreatedAt.UnixNano())...)
	if isUniqueViolation(err) {
		return fmt.Errorf("session %q: %w", s.ID, store.ErrAlreadyExists)
	}
	return err
}

func (t *txn) UpdateSession(ctx context.Context, s *store.Session) error {
	args, err := sessionArgs(s)
	if err != nil {
		return err
	}
	const update = `UPDATE sessions SET model = ?, system_prompt = ?, tools = ?, policy = ?,
		labels = ?, version = ?, system_tokens = ?, tools_tokens = ?, active_tokens = ?, active_count = ?,
		log_count = ?, view_seq = ?, compaction_round = ?, auto_paused_below = ?, view_epoch = ?, anchor_input = ?,
		anchor_local = ?, anchor_count = ?, anchor_epoch = ?, active_bytes = ?, updated_at = ?
		WHERE tenant = ? AND id = ? AND deleted_at IS NULL`
	if t.logCheck != nil { // logcheck.go
		return t.updateSessionChecked(ctx, update, args, s.ID)
	}
	res, err := t.tx.ExecContext(ctx, update, args...)
	return affected(res, err, s.ID)
}

func affected(res sql.Result, err error, id string) error {
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return fmt.Errorf("session %q: %w", id, store.ErrNotFound)
	}
	return nil
}

func (t *txn) DeleteSession(ctx context.Context, tenant, id string) error {
	res, err := t.tx.ExecContext(ctx, `UPDATE sessions SET deleted_at = ?, version = version + 1
		WHERE tenant = ? AND id = ? AND deleted_at IS NULL`, time.Now().UnixNano(), tenant, id)
	return affected(res, err, id)
}

func (t *txn) DeleteUnusedSession(ctx context.Context, tenant, id string, created time.Time) (bool, error) {
	res, err := t.tx.ExecContext(ctx, `UPDATE sessions SET deleted_at = ?, version = version + 1
		WHERE tenant = ? AND id = ? AND deleted_at IS NULL AND version = 1 AND log_count = 0 AND created_at = ?`,
		time.Now().UnixNano(), tenant, id, created.UnixNano())
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (t *txn) DeleteSessionAt(ctx context.Context, tenant, id string, created time.Time, version int64) (bool, error) {
	res, err := t.tx.ExecContext(ctx, `UPDATE sessions SET deleted_at = ?, version = version + 1
		WHERE tenant = ? AND id = ? AND deleted_at IS NULL AND version = ? AND created_at = ?
		AND NOT EXISTS (SELECT 1 FROM session_ledger l WHERE l.tenant = sessions.tenant AND l.session_id = sessions.id)
		AND NOT EXISTS (SELECT 1 FROM compactions c WHERE c.tenant = sessions.tenant AND c.session_id = sessions.id)
		AND NOT EXISTS (SELECT 1 FROM compaction_jobs j WHERE j.tenant = sessions.tenant AND j.session_id = sessions.id)`,
		time.Now().UnixNano(), tenant, id, version, created.UnixNano())
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (t *txn) InsertMessages(ctx context.Context, tenant, sessionID string, msgs []chat.Message) error {
	return t.insertMessages(ctx, tenant, sessionID, msgs, nil)
}

// insertMessages inserts msgs; a message with a shared body (refs[i].id
// set; refs may be nil) is stored without its parts (fork.go).
func (t *txn) insertMessages(ctx context.Context, tenant, sessionID string, msgs []chat.Message, refs []store.SharedBody) error {
	err := execBatched(ctx, t.tx, `INSERT INTO messages (tenant, session_id, id, position, role, kind, name,
		pinned, parts, metadata, tokens, created_at, replaces, counted_for, body_session, body_id, body_bytes) VALUES `, "", 17, len(msgs),
		func(i int, args []any) ([]any, error) {
			m := &msgs[i]
			var ref store.SharedBody
			if refs != nil {
				ref = refs[i]
			}
			parts, err := store.PartsArg(m, refs, i)
			if err != nil {
				return nil, err
			}
			meta, err := store.EncodeJSON(m.Metadata)
			if err != nil {
				return nil, err
			}
			replaces, err := store.EncodeIDs(m.Replaces)
			if err != nil {
				return nil, err
			}
			var countedFor any // NULL: unknown
			if m.CountedFor != "" {
				countedFor = m.CountedFor
			}
			return append(args, tenant, sessionID, m.ID, m.Position, string(m.Role), string(m.Kind), m.Name,
				m.Pinned, parts, meta, m.Tokens, m.CreatedAt.UnixNano(), replaces, countedFor, bodyArg(ref.SessionID, ref), bodyArg(ref.ID, ref), ref.Bytes), nil
		})
	if isUniqueViolation(err) {
		return fmt.Errorf("message: %w", store.ErrAlreadyExists)
	}
	if err != nil {
		return err
	}
	return t.indexHistory(ctx, tenant, sessionID, store.HistoryEntries(msgs))
}

// AppendView adds entries to the session's current view generation, read
// by the insert itself (a session not stored: generation 0) rather than
// by a statement of its own before it: one statement, not two, on every
// append (TestGatewayStatementsOnSQLite).
func (t *txn) AppendView(ctx context.Context, tenant, sessionID string, entries []store.ViewEntry) error {
	return execBatchedAfter(ctx, t.tx, `INSERT INTO view_entries (tenant, session_id, gen, ord, message_id)
		SELECT ?1, ?2, coalesce(`+currentGen+`, 0), column1, column2 FROM (VALUES `, `)`, []any{tenant, sessionID}, 2, len(entries),
		func(i int, args []any) ([]any, error) {
			return append(args, entries[i].Ord, entries[i].MessageID), nil
		})
}

// StageView writes entries into generation gen.
func (t *txn) StageView(ctx context.Context, tenant, sessionID string, gen int64, entries []store.ViewEntry) error {
	return execBatched(ctx, t.tx, `INSERT INTO view_entries (tenant, session_id, gen, ord, message_id) VALUES `, "", 5, len(entries),
		func(i int, args []any) ([]any, error) {
			return append(args, tenant, sessionID, gen, entries[i].Ord, entries[i].MessageID), nil
		})
}

// FlipView makes gen the session's view if it holds count entries.
func (t *txn) FlipView(ctx context.Context, tenant, sessionID string, gen int64, count int) error {
	var n int
	if err := t.tx.QueryRowContext(ctx, `SELECT count(*) FROM view_entries WHERE tenant = ? AND session_id = ? AND gen = ?`,
		tenant, sessionID, gen).Scan(&n); err != nil {
		return err
	}
	if n != count {
		return fmt.Errorf("view generation %d holds %d of %d entries: %w", gen, n, count, store.ErrVersionConflict)
	}
	_, err := t.tx.ExecContext(ctx, `UPDATE sessions SET view_gen = ? WHERE tenant = ? AND id = ?`, gen, tenant, sessionID)
	return err
}

func (t *txn) ToolCalls(ctx context.Context, tenant, sessionID string, ids []string) (map[string]store.ToolCall, error) {
	out := make(map[string]store.ToolCall, len(ids))
	err := inBatches(ids, func(batch []any, placeholders string) error {
		rows, err := t.tx.QueryContext(ctx, `SELECT call_id, position, result_position FROM tool_calls
			WHERE tenant = ? AND session_id = ? AND call_id IN (`+placeholders+`)`, append([]any{tenant, sessionID}, batch...)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var c store.ToolCall
			if err := rows.Scan(&c.CallID, &c.Position, &c.ResultPosition); err != nil {
				return err
			}
			out[c.CallID] = c
		}
		return rows.Err()
	})
	return out, err
}

func (t *txn) PutToolCalls(ctx context.Context, tenant, sessionID string, calls []store.ToolCall) error {
	t.callsWritten(tenant, sessionID)
	return execBatched(ctx, t.tx, `INSERT INTO tool_calls (tenant, session_id, call_id, position, result_position) VALUES `,
		` ON CONFLICT (tenant, session_id, call_id) DO UPDATE SET position = excluded.position, result_position = excluded.result_position`, 5, len(calls),
		func(i int, args []any) ([]any, error) {
			c := calls[i]
			return append(args, tenant, sessionID, c.CallID, c.Position, c.ResultPosition), nil
		})
}

func (t *txn) GetIdempotency(ctx context.Context, tenant, sessionID, key string) (store.Idempotency, error) {
	rec := store.Idempotency{Key: key}
	err := t.tx.QueryRowContext(ctx, `SELECT request_hash, response FROM idempotency_keys
		WHERE tenant = ? AND session_id = ? AND key = ?`, tenant, sessionID, key).Scan(&rec.RequestHash, &rec.Response)
	if errors.Is(err, sql.ErrNoRows) {
		return rec, store.ErrNotFound
	}
	return rec, err
}

func (t *txn) PutIdempotency(ctx context.Context, tenant, sessionID string, rec store.Idempotency) error {
	_, err := t.tx.ExecContext(ctx, `INSERT INTO idempotency_keys (tenant, session_id, key, request_hash, response, created_at)
		VALUES (?, ?, ?, ?, ?, ?)`, tenant, sessionID, rec.Key, rec.RequestHash, rec.Response, time.Now().UnixNano())
	if isUniqueViolation(err) {
		return fmt.Errorf("idempotency key: %w", store.ErrAlreadyExists)
	}
	return err
}

// LockCompaction needs nothing: the IMMEDIATE transaction holds the
// database's write lock already.
func (t *txn) LockCompaction(context.Context, string, string) error { return nil }

func (t *txn) ViewMessages(ctx context.Context, tenant, sessionID string) ([]chat.Message, error) {
	return collectMessages(t.tx.QueryContext(ctx, `SELECT `+messageCols+`
		FROM view_entries v JOIN messages m ON m.tenant = v.tenant AND m.session_id = v.session_id AND m.id = v.message_id
		WHERE v.tenant = ? AND v.session_id = ? AND v.gen = `+currentGen+` ORDER BY v.ord`, tenant, sessionID))
}

// SetMessageTokens implements store.Tx.
func (t *txn) SetMessageTokens(ctx context.Context, tenant, sessionID string, tokens map[string]int64, countedFor string) error {
	for id, n := range tokens {
		res, err := t.tx.ExecContext(ctx, `UPDATE messages SET tokens = ?, counted_for = NULLIF(?, '') WHERE tenant = ? AND session_id = ? AND id = ?`,
			n, countedFor, tenant, sessionID, id)
		if err != nil {
			return err
		}
		if k, err := res.RowsAffected(); err != nil {
			return err
		} else if k == 0 {
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
	var reverted any
	if c.RevertedAt != nil {
		reverted = c.RevertedAt.UnixNano()
	}
	_, err = t.tx.ExecContext(ctx, `INSERT INTO compactions (tenant, session_id, `+compactionCols+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, tenant, sessionID, c.ID, c.Round, j.Tiers, c.TokensBefore,
		c.TokensAfter, j.Items, c.Summary, j.ViewBefore, j.ViewAfter, c.CreatedAt.UnixNano(), c.ExpiresAt.UnixNano(), reverted)
	if isUniqueViolation(err) {
		return fmt.Errorf("compaction %q: %w", c.ID, store.ErrAlreadyExists)
	}
	return err
}

func (t *txn) GetCompaction(ctx context.Context, tenant, sessionID, id string) (store.Compaction, error) {
	return scanCompaction(t.tx.QueryRowContext(ctx, `SELECT `+compactionCols+` FROM compactions
		WHERE tenant = ? AND session_id = ? AND id = ?`, tenant, sessionID, id))
}

func (t *txn) MarkReverted(ctx context.Context, tenant, sessionID, id string, at time.Time) error {
	_, err := t.tx.ExecContext(ctx, `UPDATE compactions SET reverted_at = ? WHERE tenant = ? AND session_id = ? AND id = ?`,
		at.UnixNano(), tenant, sessionID, id)
	return err
}

func (t *txn) GetCalibration(ctx context.Context, tenant, model string) (store.Calibration, error) {
	return getCalibration(ctx, t.tx, tenant, model)
}

func (t *txn) PutCalibration(ctx context.Context, tenant string, c store.Calibration) error {
	_, err := t.tx.ExecContext(ctx, `INSERT INTO calibrations (tenant, model, ratio, samples, updated_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (tenant, model) DO UPDATE SET ratio = excluded.ratio, samples = excluded.samples, updated_at = excluded.updated_at`,
		tenant, c.Model, c.Ratio, c.Samples, c.UpdatedAt.UnixNano())
	return err
}

func (t *txn) CountSessions(ctx context.Context, tenant string) (int, error) {
	var n int
	err := t.tx.QueryRowContext(ctx, `SELECT count(*) FROM sessions WHERE tenant = ? AND deleted_at IS NULL`, tenant).Scan(&n)
	return n, err
}
