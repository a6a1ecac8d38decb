package engine

import (
	"cmp"
	"context"
	"slices"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// maxLogTail bounds the messages of one LogTailOf read.
const maxLogTail = 1000

// LogTailOf returns messages of the log of the session whose row the
// caller read (s: its tenant and id; the row is not read again, so a caller
// that matched the session on its row, the gateway's log cache, saves that
// round trip) after position after (0: from the start), oldest first: up
// to limit (at most 1,000; 0: 1,000), ending at CONTEXTD_MAX_RESPONSE_BYTES
// by the rows' stored sizes before any is loaded (always at least one), so
// a reader's memory per call is bounded however large the log's messages
// are. The log is append-only, so a reader that keeps what it read needs
// only the tail after it next time (the gateway matches a client's resent
// history against the log this way), and the messages read are the row's
// log's and maybe more; a session deleted since answers its log still (the
// caller's next write finds it gone).
func (e *Engine) LogTailOf(ctx context.Context, s store.Session, after int64, limit int) ([]chat.Message, error) {
	tenant, id := s.Tenant, s.ID
	if limit <= 0 || limit > maxLogTail {
		limit = maxLogTail
	}
	msgs, _, _, err := e.readPage(ctx, tenant, id, ViewLog, after, limit)
	slices.SortFunc(msgs, func(a, b chat.Message) int { return cmp.Compare(a.Position, b.Position) })
	return msgs, err
}
