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
	tooBig := func() error {
		return fmt.Errorf("the %d messages%s PrepareContext would return are more than %s (%d bytes) allows in one response; nothing was changed: send the view_token of the view you hold to receive only what changed, compact, or raise %s and your client's receive limit together: %w",
			len(send), delta, limitResponseBytes, limit, limitResponseBytes, ErrResourceExhausted)
	}
	n, from := prepareOverhead, 0
	if len(send) == len(view) {
		// The view's cached prefix is sized once (viewEntry.answer).
		sized, k := e.views.answerPrefix(after, view)
		n, from = n+sized, k
	}
	if n > limit {
		return tooBig()
	}
	for i := from; i < len(send); i++ {
		if n += messageBytes(&send[i]); n > limit {
			return tooBig()
		}
	}
	return nil
}

// answerBytes is what msgs take in a PrepareContext answer.
func answerBytes(msgs []chat.Message) int {
	n := 0
	for i := range msgs {
		n += messageBytes(&msgs[i])
	}
	return n
}

// answerPrefix is the answer size of the longest prefix of view that is
// the cached view of s's session (the same messages, not copies of their
// content: a view the call extended by its append), and its length; 0, 0
// when the cache holds none. Checking the prefix is a comparison of
// pointers per message; sizing it happens once per cached view.
func (c *viewCache) answerPrefix(s *store.Session, view []chat.Message) (int, int) {
	ent := c.get(s.Tenant, s.ID)
	if ent == nil || !ent.stamp.created.Equal(s.CreatedAt) || len(ent.msgs) == 0 || len(ent.msgs) > len(view) {
		return 0, 0
	}
	for i := range ent.msgs {
		if !sameMessage(&ent.msgs[i], &view[i]) {
			return 0, 0
		}
	}
	n := ent.answer.Load()
	if n == 0 {
		n = int64(answerBytes(ent.msgs)) + 1
		ent.answer.Store(n)
	}
	return int(n - 1), len(ent.msgs)
}

// sameMessage reports whether b is a copy of the struct a (cached
// messages are never changed, so one sharing a's parts is a).
func sameMessage(a, b *chat.Message) bool {
	return len(a.Parts) > 0 && len(a.Parts) == len(b.Parts) && &a.Parts[0] == &b.Parts[0] &&
		a.ID == b.ID && a.Name == b.Name && len(a.Metadata) == len(b.Metadata) && len(a.Replaces) == len(b.Replaces)
}
