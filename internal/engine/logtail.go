package engine

import (
	"cmp"
	"context"
	"slices"

	"github.com/contextd/contextd/internal/chat"
)

// maxLogTail bounds the messages of one LogTail read.
const maxLogTail = 1000

// LogTail returns messages of the session's log after position after (0:
// from the start), oldest first: up to limit (at most 1,000), ending at
// CONTEXTD_MAX_RESPONSE_BYTES by the rows' stored sizes before any is
// loaded (always at least one), so a reader's memory per call is bounded
// however large the log's messages are. The log is append-only, so a
// reader that keeps what it read needs only the tail after it next time
// (the gateway matches a client's resent history against the log this
// way).
func (e *Engine) LogTail(ctx context.Context, tenant, id string, after int64, limit int) ([]chat.Message, error) {
	if _, err := e.readSession(ctx, tenant, id); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > maxLogTail {
		limit = maxLogTail
	}
	msgs, _, _, err := e.readPage(ctx, tenant, id, ViewLog, after, limit)
	slices.SortFunc(msgs, func(a, b chat.Message) int { return cmp.Compare(a.Position, b.Position) })
	return msgs, err
}
