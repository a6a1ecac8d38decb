package store

import (
	"context"

	"github.com/contextd/contextd/internal/chat"
)

// SharedPrefix names the log a new session's first messages repeat: the
// session it forked from (a client rewound or edited a message and went
// on) and how many of its log's first messages the fork shares.
type SharedPrefix struct {
	SessionID string
	Length    int64
}

// ForkTx is what a transaction does for a fork (docs/storage.md).
type ForkTx interface {
	// InsertForkMessages is InsertMessages for the first messages of a
	// session that forked from p: a message at a position up to p.Length
	// whose stored parts would be byte for byte those of p's message at
	// that position is stored once, not again (its row names the row that
	// holds them, which it locks until the transaction ends). Every other
	// message is stored as InsertMessages stores it. Reads of the session
	// (views, log, sizes, MessagesByID) cannot tell the difference, and the
	// parts stay readable when p's row goes (copy-on-delete). Its work is
	// a primary-key probe a message up to p.Length (on PostgreSQL one
	// query, after the writes a pipelined transaction queued before it,
	// which go in a round trip of their own).
	InsertForkMessages(ctx context.Context, tenant, sessionID string, msgs []chat.Message, p SharedPrefix) error
}

// SharedBody names the row that holds a fork's message's parts (ID empty:
// the message holds its own) and their size.
type SharedBody struct {
	SessionID, ID string
	Bytes         int64
	// Parts are the message's parts as ShareBodies encoded them to look
	// them up ("": not a candidate), which a message that holds its own
	// stores as they are, not encoded again.
	Parts string
}

// ShareBodies is InsertForkMessages' lookup: of the messages of session
// sessionID, those at a position up to p.Length are candidates, and find
// returns, by position, the rows holding p's parts at those positions
// that are the candidates' parts (a position missing: not the same, or
// gone); the others hold their own.
func ShareBodies(msgs []chat.Message, sessionID string, p SharedPrefix, find func(positions []int64, parts []string) (map[int64]SharedBody, error)) ([]SharedBody, error) {
	var positions []int64
	var parts []string
	var at []int // the candidates' indices in msgs
	for i := range msgs {
		m := &msgs[i]
		if p.SessionID == "" || p.SessionID == sessionID || m.Position < 1 || m.Position > p.Length {
			continue
		}
		enc, err := EncodeJSON(m.Parts)
		if err != nil {
			return nil, err
		}
		positions, parts, at = append(positions, m.Position), append(parts, enc), append(at, i)
	}
	refs := make([]SharedBody, len(msgs))
	if len(positions) == 0 {
		return refs, nil
	}
	found, err := find(positions, parts)
	if err != nil {
		return nil, err
	}
	for k, i := range at {
		if ref, ok := found[positions[k]]; ok {
			ref.Bytes = int64(len(parts[k]))
			refs[i] = ref
		} else {
			refs[i].Parts = parts[k]
		}
	}
	return refs, nil
}

// PartsArg is the parts column of msgs[i] (m) as InsertForkMessages and
// InsertMessages store it, by refs (nil: none shared): "" when it names a
// row that holds them, else its parts encoded, as ShareBodies encoded them
// when it did.
func PartsArg(m *chat.Message, refs []SharedBody, i int) (string, error) {
	switch {
	case refs == nil:
		return EncodeJSON(m.Parts)
	case refs[i].ID != "":
		return "", nil
	case refs[i].Parts != "":
		return refs[i].Parts, nil
	}
	return EncodeJSON(m.Parts)
}
