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
	// one indexed read a message up to p.Length.
	InsertForkMessages(ctx context.Context, tenant, sessionID string, msgs []chat.Message, p SharedPrefix) error
}

// SharedBody names the row that holds a fork's message's parts (ID empty:
// the message holds its own) and their size.
type SharedBody struct {
	SessionID, ID string
	Bytes         int64
}

// ShareBodies is InsertForkMessages' lookup: for each of the messages of
// session sessionID at a position up to p.Length, find returns the row
// holding p's parts at that position if they are parts (ok false: not the
// same, or gone); the others hold their own.
func ShareBodies(msgs []chat.Message, sessionID string, p SharedPrefix, find func(pos int64, parts string) (SharedBody, bool, error)) ([]SharedBody, error) {
	refs := make([]SharedBody, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		if p.SessionID == "" || p.SessionID == sessionID || m.Position < 1 || m.Position > p.Length {
			continue
		}
		parts, err := EncodeJSON(m.Parts)
		if err != nil {
			return nil, err
		}
		ref, ok, err := find(m.Position, parts)
		if err != nil {
			return nil, err
		}
		if ok {
			ref.Bytes = int64(len(parts))
			refs[i] = ref
		}
	}
	return refs, nil
}
