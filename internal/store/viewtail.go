package store

import (
	"context"

	"github.com/contextd/contextd/internal/chat"
)

// ViewTailReader is a store that reads a page of a session's active view
// and then the session's row in one round trip (PostgreSQL: one
// pipeline), where two reads would take two. The row is read after the
// page, as a read of its own after it would be, so a row at the version
// the page was read for confirms the page (the engine's view cache,
// viewOf).
type ViewTailReader interface {
	// ActiveMessagesAndSession is ActiveMessages(tenant, id, after,
	// limit) and then the session's row, read without a lock; a missing
	// session is ErrNotFound.
	ActiveMessagesAndSession(ctx context.Context, tenant, id string, after int64, limit int) ([]chat.Message, []int64, Session, error)
}
