package gateway

import (
	"maps"

	"github.com/contextd/contextd/internal/chat"
)

// asSent puts into the view, in place of the stored copy of each message
// the client sent in this request, the client's own version of it: what
// goes upstream for a message that was not compacted is what the client
// sent this time (its audio, files, images, reasoning, thinking and
// unknown fields; a tool result it cleared, cleared), never the stored copy
// of an earlier request. A stored message is the client's message k when
// it carries the history chain the request's message k ends (identify.go),
// so the two have the same identity and place. Placeholders and summaries
// stay contextd's. The stored copy's place (id, position, kind, tokens)
// and its other metadata are kept; the view is copied before it is changed
// (the engine may hold it).
func asSent(view []chat.Message, c *conversation) []chat.Message {
	out := view
	copied := false
	for i := range view {
		client, same := c.sentOf(&view[i]) // a client edit stands at its original's place (clientOf)
		if client == nil || same {
			continue // not the client's, or the same bytes as stored (the usual case): nothing to change
		}
		if !copied {
			out, copied = append([]chat.Message(nil), view...), true
		}
		out[i] = clientCopy(&out[i], client)
	}
	return out
}

// clientCopy is the stored message with the client's content: its parts
// and name, and its bytes' metadata (raw JSON and digest) in place of the
// stored copy's; the stored copy's place and other metadata stay. The
// parts are shared with client.
func clientCopy(stored, client *chat.Message) chat.Message {
	m := *stored
	m.Parts, m.Name = client.Parts, client.Name
	m.Metadata = maps.Clone(m.Metadata)
	delete(m.Metadata, metaRaw)
	for _, k := range []string{metaRaw, metaDigest} {
		if v, ok := client.Metadata[k]; ok {
			m.Metadata[k] = v
		}
	}
	return m
}

// sentAt is a stored message's place in the client's history as a
// request found it: looked up once a request, not again by each of its
// readers (the edits' planning reads every message of the view, and
// asSent every message of the prepared view: the same messages, but
// the request's new ones).
type sentAt struct {
	id   string // the stored message's
	n    int32  // the client's message n (1-based) is its; 0: none
	same bool   // the client's bytes are the stored copy's: digest and raw JSON
	// digested: same, with a digest (the client's, stamped): the stored
	// copy's digest is the client's message's, c.digests[n-1].
	digested bool
}

// sentPlaces are a request's sentAt, by log position from first on.
type sentPlaces struct {
	first int64
	at    []sentAt
}

// sentOf is the request's message at the place of a stored message of the
// view (clientOf) and whether its bytes are the stored copy's, looked up
// in the message's metadata once a request: remembered by the stored
// message's log position and checked by its ID (a client edit, with no
// position, is looked up each time). An ID is "msg_" and the position in
// every session, so what is kept holds for one session only: prepare
// forgets it at each match (TestRetryInAnotherSessionSendsItsOwnPlaces).
// What it keeps is one sentAt (24 bytes) per log position from the first
// it is asked about on, at most 2n+16 of them for a request of n messages
// (maxSentPlaces): a view's positions can lie far apart (a long log's
// early message and its latest), and a message past that is looked up
// each time instead (TestSentPlacesBounded).
func (c *conversation) sentOf(stored *chat.Message) (client *chat.Message, same bool) {
	if at, ok := c.known(stored); ok {
		if at.n > 0 {
			return &c.msgs[at.n-1], at.same
		}
		return nil, false
	}
	s := &c.sent
	k := stored.Position - s.first
	n := clientAt(stored, c)
	digested := false
	if n > 0 {
		client = &c.msgs[n-1]
		d := stored.Metadata[metaDigest]
		same = d == client.Metadata[metaDigest] && stored.Metadata[metaRaw] == client.Metadata[metaRaw]
		digested = same && d != ""
	}
	if stored.Position <= 0 || stored.ID == "" || len(s.at) > 0 && (k < 0 || k >= maxSentPlaces(c)) {
		return client, same // no position, or before the first or too far past it: not kept
	}
	if len(s.at) == 0 {
		s.first, k = stored.Position, 0
		s.at = make([]sentAt, 0, len(c.msgs)+1)
	}
	if k >= int64(len(s.at)) {
		s.at = append(s.at, make([]sentAt, k+1-int64(len(s.at)))...)
	}
	s.at[k] = sentAt{id: stored.ID, n: int32(n), same: same, digested: digested}
	return client, same
}

// maxSentPlaces bounds the places sentOf keeps for c: twice its messages
// and a few (a session's log holds the client's messages and replies it
// recorded, which the client resends).
func maxSentPlaces(c *conversation) int64 { return 2*int64(len(c.msgs)) + 16 }

// known is what sentOf found of stored this request, if it was asked.
func (c *conversation) known(stored *chat.Message) (sentAt, bool) {
	s := &c.sent
	k := stored.Position - s.first
	if stored.Position > 0 && k >= 0 && k < int64(len(s.at)) && s.at[k].id == stored.ID {
		return s.at[k], true
	}
	return sentAt{}, false
}

// viewDigest is storedDigest of a message of the view, which a door's
// build looks its client's own JSON up by: for a message the client sent
// with the same bytes (asSent found it so), the client's message's digest,
// held, instead of reading and decoding the stored copy's metadata again.
func (c *conversation) viewDigest(m *chat.Message) [32]byte {
	if at, ok := c.known(m); ok && at.digested && int(at.n) <= len(c.digests) {
		return c.digests[at.n-1]
	}
	return storedDigest(m)
}
