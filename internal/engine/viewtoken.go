package engine

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// A view token names an active view a client holds: the session (id and
// incarnation), the view epoch and the ordinal of the view's last message.
// Within one epoch a view only grows at its end, so a client holding the
// view of a token needs only the messages after that ordinal to hold the
// current view, when the epoch is still the session's.
type viewToken struct {
	id      string
	created int64 // the session's CreatedAt, Unix nanoseconds
	epoch   int
	last    int64
}

const viewTokenPrefix = "v1"

func (t viewToken) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strings.Join([]string{viewTokenPrefix,
		strconv.FormatInt(t.created, 10), strconv.Itoa(t.epoch), strconv.FormatInt(t.last, 10), t.id}, ":")))
}

func tokenOf(s *store.Session, ords []int64) viewToken {
	return viewToken{id: s.ID, created: s.CreatedAt.UnixNano(), epoch: s.ViewEpoch, last: lastOrd(ords)}
}

// parseViewToken reads a token given for session id; anything this server
// did not issue for that session is InvalidArgument naming field.
func parseViewToken(field, text, id string) (viewToken, error) {
	bad := chat.Invalid(field, "is not a view token this server issued for this session")
	raw, err := base64.RawURLEncoding.DecodeString(text)
	if err != nil {
		return viewToken{}, bad
	}
	f := strings.SplitN(string(raw), ":", 5)
	if len(f) != 5 || f[0] != viewTokenPrefix || f[4] != id {
		return viewToken{}, bad
	}
	t := viewToken{id: f[4]}
	var e1, e2, e3 error
	t.created, e1 = strconv.ParseInt(f[1], 10, 64)
	t.epoch, e2 = strconv.Atoi(f[2])
	t.last, e3 = strconv.ParseInt(f[3], 10, 64)
	if e1 != nil || e2 != nil || e3 != nil || t.epoch < 0 || t.last < 0 {
		return viewToken{}, bad
	}
	return t, nil
}

// continues reports whether the view of t is a prefix of the view of s:
// the same session incarnation and view epoch, and no further than s.
func (t viewToken) continues(s *store.Session) bool {
	return t.created == s.CreatedAt.UnixNano() && t.epoch == s.ViewEpoch && t.last <= s.ViewSeq
}

// prepareView is the view part of a PrepareContext answer for session s:
// the whole active view with its token or, given the token of a view that
// the current one continues, only the messages after it.
//
// It also returns the session the view is of: s, or a newer read when s
// changed meanwhile (the caller's status must then be of that one).
func (e *Engine) prepareView(ctx context.Context, s store.Session, since *viewToken) (PrepareResult, store.Session, error) {
	msgs, ords, s, err := e.viewOf(ctx, s)
	if err != nil {
		return PrepareResult{}, s, err
	}
	out := PrepareResult{Messages: msgs, ViewToken: tokenOf(&s, ords).String(), view: msgs}
	if since != nil && since.continues(&s) {
		out.Messages, _ = after(msgs, ords, since.last)
		out.Delta = true
	}
	return out, s, nil
}
