package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/contextd/contextd/internal/store"
)

// readAhead is what a transaction marked store.ReadAhead read with its
// session's lock, for that session: each answer serves the transaction's
// next read of it once, unless a write came between (pipe.ahead is then
// nil).
type readAhead struct {
	tenant, id string
	calls      []store.ToolCall
	hasCalls   bool
	view       store.PreparedView
	viewErr    error
	hasView    bool
}

const (
	lockSession = getSession + ` FOR UPDATE`
	openCalls   = `SELECT call_id, position FROM tool_calls
		WHERE tenant = $1 AND session_id = $2 AND result_position = 0 ORDER BY position, call_id`
	preparedView = `SELECT fixed, message_ids, view_token FROM prepared_views WHERE tenant = $1 AND session_id = $2`
)

// lockReadingAhead locks the session and reads what ctx's store.ReadAhead
// names, with what is queued, in one round trip (the reads after the
// lock, in the same pipeline, so they run once it is granted).
// The tools column's text comes with the session (scanSessionTools).
func (t *txn) lockReadingAhead(ctx context.Context, tenant, id string, ra store.ReadAhead) (store.Session, rowTools, error) {
	b := &pgx.Batch{}
	hint := toolsHintOf(tenant, id)
	b.Queue(lockSession, tenant, id, hint.arg())
	heads := t.heads.due(ra)
	if heads {
		b.Queue(noHeadsGuard, tenant, ra.NoHeads)
	}
	if ra.OpenToolCalls {
		b.Queue(openCalls, tenant, id)
	}
	if ra.PreparedView {
		b.Queue(preparedView, tenant, id)
	}
	t.tx.ahead = nil
	br := t.tx.sendBatch(ctx, b)
	defer br.Close()
	s, tools, err := scanSessionTools(br.QueryRow(), hint)
	if err != nil {
		// A missing session's reads ahead still ran: one that failed
		// aborted the transaction, and its error is the answer (as
		// batchRow.Scan's for a missing row), not ErrNotFound.
		if cerr := br.Close(); errors.Is(err, store.ErrNotFound) && cerr != nil {
			err = t.heads.answer(cerr)
		}
		return s, rowTools{}, err
	}
	if heads {
		if _, err := br.Exec(); err != nil {
			return store.Session{}, rowTools{}, t.heads.answer(err)
		}
	}
	ahead := &readAhead{tenant: tenant, id: id}
	if ra.OpenToolCalls {
		rows, err := br.Query()
		if err != nil {
			return store.Session{}, rowTools{}, err
		}
		if ahead.calls, err = scanOpenCalls(rows); err != nil {
			return store.Session{}, rowTools{}, err
		}
		ahead.hasCalls = true
	}
	if ra.PreparedView {
		ahead.view, ahead.viewErr = scanPreparedView(br.QueryRow())
		if ahead.viewErr != nil && !errors.Is(ahead.viewErr, store.ErrNotFound) {
			return store.Session{}, rowTools{}, ahead.viewErr
		}
		ahead.hasView = true
	}
	if err := br.Close(); err != nil {
		return store.Session{}, rowTools{}, err
	}
	t.tx.ahead = ahead
	return s, tools, nil
}

// aheadCalls returns the open tool calls read ahead for the session, once.
func (t *txn) aheadCalls(tenant, id string) ([]store.ToolCall, bool) {
	a := t.tx.ahead
	if a == nil || !a.hasCalls || a.tenant != tenant || a.id != id {
		return nil, false
	}
	a.hasCalls = false
	return a.calls, true
}

// aheadView returns the prepared view read ahead for the session, once.
func (t *txn) aheadView(tenant, id string) (store.PreparedView, bool, error) {
	a := t.tx.ahead
	if a == nil || !a.hasView || a.tenant != tenant || a.id != id {
		return store.PreparedView{}, false, nil
	}
	a.hasView = false
	return a.view, true, a.viewErr
}

func scanOpenCalls(rows pgx.Rows) ([]store.ToolCall, error) {
	defer rows.Close()
	var out []store.ToolCall
	for rows.Next() {
		var c store.ToolCall
		if err := rows.Scan(&c.CallID, &c.Position); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

func scanPreparedView(row pgx.Row) (store.PreparedView, error) {
	var v store.PreparedView
	var ids string
	err := row.Scan(&v.Fixed, &ids, &v.ViewToken)
	if errors.Is(err, pgx.ErrNoRows) {
		return v, store.ErrNotFound
	}
	v.IDs = store.DecodeIDRuns(ids)
	return v, err
}
