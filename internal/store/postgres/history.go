package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/contextd/contextd/internal/store"
)

// queueHistory queues a batch's entries into the history index; the last
// becomes the session's head. Same transaction (and round trip) as the
// messages' insert (InsertMessages).
func queueHistory(b *pgx.Batch, tenant, sessionID string, entries []store.HistoryEntry) {
	if len(entries) == 0 {
		return
	}
	b.Queue(`UPDATE history_index SET head = false WHERE tenant = $1 AND session_id = $2 AND head`, tenant, sessionID)
	lengths, chains, heads := make([]int64, len(entries)), make([]string, len(entries)), make([]bool, len(entries))
	for i, e := range entries {
		lengths[i], chains[i], heads[i] = e.Length, e.Chain, i == len(entries)-1
	}
	b.Queue(`INSERT INTO history_index (tenant, session_id, length, chain, head)
		SELECT $1, $2, * FROM unnest($3::bigint[], $4::text[], $5::boolean[])
		ON CONFLICT (tenant, session_id, length) DO UPDATE SET chain = excluded.chain, head = excluded.head`,
		tenant, sessionID, lengths, chains, heads)
}

// FindHistory: one statement; each chain reads at most limit rows of the
// index (tenant, chain, head), heads first, so a chain that many sessions
// share (a popular opening) costs limit rows, not one per session.
func (s *Store) FindHistory(ctx context.Context, tenant string, chains []string, limit int) (_ []store.HistoryHit, err error) {
	defer unavailable(&err)
	rows, err := s.pool.Query(ctx, findHistory, tenant, chains, limit)
	if err != nil {
		return nil, err
	}
	return scanHistoryHits(rows)
}

const findHistory = `SELECT x.chain, x.session_id, x.length, x.head
		FROM unnest($2::text[]) AS c(chain) CROSS JOIN LATERAL (
			SELECT h.chain, h.session_id, h.length, h.head FROM history_index h
			JOIN sessions s ON s.tenant = h.tenant AND s.id = h.session_id AND s.deleted_at IS NULL
			WHERE h.tenant = $1 AND h.chain = c.chain ORDER BY h.head DESC LIMIT $3) x
		ORDER BY x.head DESC, x.length DESC LIMIT $3`

// FindHistoryAndSession implements store.HistoryRowFinder: the session's
// row and the lookup are two statements of one pipeline, one round trip.
func (s *Store) FindHistoryAndSession(ctx context.Context, tenant string, chains []string, limit int, id string) (_ []store.HistoryHit, _ store.Session, err error) {
	defer unavailable(&err)
	b := &pgx.Batch{}
	hint := toolsHintOf(tenant, id)
	b.Queue(getSession, tenant, id, hint.arg())
	b.Queue(findHistory, tenant, chains, limit)
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	row, err := scanSession(br.QueryRow(), hint)
	s.rows.seen(heldKey{tenant, id}, row, err)
	if err != nil {
		if cerr := br.Close(); errors.Is(err, store.ErrNotFound) && cerr != nil {
			err = cerr
		}
		return nil, store.Session{}, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, store.Session{}, err
	}
	hits, err := scanHistoryHits(rows)
	if err == nil {
		err = br.Close()
	}
	if err != nil {
		return nil, store.Session{}, err
	}
	return hits, row, nil
}

func scanHistoryHits(rows pgx.Rows) ([]store.HistoryHit, error) {
	defer rows.Close()
	var out []store.HistoryHit
	for rows.Next() {
		var h store.HistoryHit
		if err := rows.Scan(&h.Chain, &h.SessionID, &h.Length, &h.Head); err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, rows.Err()
}
