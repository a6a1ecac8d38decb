package sqlite

import (
	"context"

	"github.com/contextd/contextd/internal/store"
)

// indexHistory adds a batch's entries to the history index; the last
// becomes the session's head, taking the mark from the old head as it is
// written (migration 00015's trigger history_head_moved: one statement
// less on every append). Same transaction as the messages' insert.
func (t *txn) indexHistory(ctx context.Context, tenant, sessionID string, entries []store.HistoryEntry) error {
	if len(entries) == 0 {
		return nil
	}
	last := len(entries) - 1
	return execBatched(ctx, t.tx, `INSERT INTO history_index (tenant, session_id, length, chain, head) VALUES `,
		` ON CONFLICT (tenant, session_id, length) DO UPDATE SET chain = excluded.chain, head = excluded.head`, 5, len(entries),
		func(i int, args []any) ([]any, error) {
			return append(args, tenant, sessionID, entries[i].Length, entries[i].Chain, i == last), nil
		})
}

// FindHistory: one statement per 100 chains, each chain reading at most
// limit rows of the index (its (tenant, chain, head) order, heads first),
// so a chain that many sessions share (a popular opening) costs limit
// rows, not one per session; the rows are then ordered as the interface
// says.
// The limit is written into the statement, not bound: bound, it made
// SQLite prepare the statement again on every call
// (BenchmarkFindHistoryOneChain: 36–40 µs a lookup of one chain, 10–12 µs
// written in).
func (s *Store) FindHistory(ctx context.Context, tenant string, chains []string, limit int) ([]store.HistoryHit, error) {
	const perStatement = 100 // SQLite allows 500 terms in a compound SELECT
	var out []store.HistoryHit
	for len(chains) > 0 {
		batch := chains[:min(len(chains), perStatement)]
		chains = chains[len(batch):]
		q, args := perKey(`SELECT h.chain, h.session_id, h.length, h.head FROM history_index h
				JOIN sessions s ON s.tenant = h.tenant AND s.id = h.session_id AND s.deleted_at IS NULL
				WHERE h.tenant = ? AND h.chain = ? ORDER BY h.head DESC`, tenant, batch, limit) // calls.go
		if err := s.findHistory(ctx, q, args, &out); err != nil {
			return nil, err
		}
	}
	return store.OrderHistoryHits(out, limit), nil
}

// findHistory runs one statement of FindHistory. A statement of a few
// chains (the gateway's usual lookup: the request's new messages) goes
// through the prepared statements (prepared.go): parsed on every call, it
// was 8 % of the gateway's CPU per request at 16 conversations of 100
// messages (docs/performance.md); longer ones are parsed each time.
func (s *Store) findHistory(ctx context.Context, query string, args []any, out *[]store.HistoryHit) error {
	rows, err := reads{s}.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var h store.HistoryHit
		if err := rows.Scan(&h.Chain, &h.SessionID, &h.Length, &h.Head); err != nil {
			return err
		}
		*out = append(*out, h)
	}
	return rows.Err()
}
