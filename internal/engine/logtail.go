package engine

import (
	"context"

	"github.com/contextd/contextd/internal/chat"
)

// maxLogTail bounds one LogTail read.
const maxLogTail = 1000

// LogTail returns up to limit messages of the session's log after position
// after (0: from the start), oldest first, and the session as read before
// them. The log is append-only, so a reader that keeps what it read needs
// only the tail after it next time (the gateway matches a client's resent
// history against the log this way). limit is at most 1,000.
func (e *Engine) LogTail(ctx context.Context, tenant, id string, after int64, limit int) ([]chat.Message, error) {
	if _, err := e.readSession(ctx, tenant, id); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > maxLogTail {
		limit = maxLogTail
	}
	return e.store.LogMessages(ctx, tenant, id, after, limit)
}
