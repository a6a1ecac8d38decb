package engine

import (
	"fmt"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// A PrepareContext answer is one message: the active view (bounded by the
// model's window in tokens, so by about four bytes a token of text, plus
// what tool definitions and framing add) or, given a view_token the view
// continues, only the messages after it, plus the status and cache hints.
// A large-window model's whole view can be more than a client receives at
// once (4 MB by default in Go and Node), so the answer is held to
// MaxResponseBytes like every other response, and checked before anything is
// committed: a view over it is RESOURCE_EXHAUSTED naming the setting and
// the call changes nothing.

// limitResponseBytes names MaxResponseBytes as the configuration spells it.
const limitResponseBytes = "CONTEXTD_MAX_RESPONSE_BYTES"

// prepareOverhead is what an answer holds besides its messages (status,
// usage, warnings, cache hints, view token), generously.
const prepareOverhead = 16 << 10

// checkAnswerSize refuses a PrepareContext answer over MaxResponseBytes:
// view is the whole view the call would return for session after, of which
// only what follows since is sent when since continues it.
func (e *Engine) checkAnswerSize(after *store.Session, view []chat.Message, since *viewToken) error {
	limit := e.limits.MaxResponseBytes
	if limit <= 0 {
		return nil
	}
	send, delta := view, ""
	if since != nil && since.continues(after) {
		send, delta = view[min(int(since.last), len(view)):], " after the view of view_token"
	}
	n := prepareOverhead
	for i := range send {
		if n += messageBytes(&send[i]); n > limit {
			return fmt.Errorf("the %d messages%s PrepareContext would return are more than %s (%d bytes) allows in one response; nothing was changed: send the view_token of the view you hold to receive only what changed, compact, or raise %s and your client's receive limit together: %w",
				len(send), delta, limitResponseBytes, limit, limitResponseBytes, ErrResourceExhausted)
		}
	}
	return nil
}
