package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// ActiveMessagesAndSession implements store.ViewTailReader: the page and
// then the row, one pipeline.
func (s *Store) ActiveMessagesAndSession(ctx context.Context, tenant, id string, after int64, limit int) (_ []chat.Message, _ []int64, _ store.Session, err error) {
	defer unavailable(&err)
	b := &pgx.Batch{}
	hint := toolsHintOf(tenant, id)
	b.Queue(activeMessages, tenant, id, after, limit)
	b.Queue(getSession, tenant, id, hint.arg())
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	rows, err := br.Query()
	if err != nil {
		return nil, nil, store.Session{}, err
	}
	msgs, ords, err := scanActive(rows)
	if err != nil {
		return nil, nil, store.Session{}, err
	}
	row, err := scanSession(br.QueryRow(), hint)
	s.rows.seen(heldKey{tenant, id}, row, err)
	if cerr := br.Close(); cerr != nil && (err == nil || errors.Is(err, store.ErrNotFound)) {
		err = cerr
	}
	if err != nil {
		return nil, nil, store.Session{}, err
	}
	return msgs, ords, row, nil
}
