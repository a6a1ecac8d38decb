package engine

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"

	"github.com/contextd/contextd/internal/store"
)

// Page tokens of GetMessages, ListCompactions and ExpandMessage are bound to
// what they page through: the kind of listing, the session (its id and
// incarnation: a deleted and re-created id is another session) and, for
// ExpandMessage, the message. A token of another session, tenant, listing or
// message is InvalidArgument naming page_token rather than a silently
// shifted page. The binding is a digest, not the ids themselves, so a token
// stays short (under 60 bytes) whatever the ids hold; it is not a secret:
// every read is filtered by tenant and session anyway.
//
//	base64url("p2:" kind ":" position ":" base64url(sha256(kind, incarnation, session, message)[:12]))
const pageTokenVersion = "p2"

func pageBinding(kind string, s *store.Session, message string) string {
	h := sha256.New()
	for _, f := range []string{kind, strconv.FormatInt(s.CreatedAt.UnixNano(), 10), s.ID, message} {
		h.Write([]byte(strconv.Itoa(len(f))))
		h.Write([]byte{':'})
		h.Write([]byte(f))
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:12])
}

// encodePageToken returns the token that continues a listing after
// position.
func encodePageToken(kind string, s *store.Session, message string, position int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strings.Join([]string{pageTokenVersion, kind,
		strconv.FormatInt(position, 10), pageBinding(kind, s, message)}, ":")))
}

// decodePageToken returns the position a token continues after, or an error
// when the token was not issued for this listing of this session (and
// message).
func decodePageToken(token, kind string, s *store.Session, message string) (int64, error) {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	f := strings.Split(string(raw), ":")
	if err != nil || len(f) != 4 || f[0] != pageTokenVersion || f[1] != kind || f[3] != pageBinding(kind, s, message) {
		return 0, errors.New("bad token")
	}
	n, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || n < 0 {
		return 0, errors.New("bad token")
	}
	return n, nil
}
