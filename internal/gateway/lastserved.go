package gateway

import (
	"context"
	"errors"
	"time"

	"github.com/contextd/contextd/internal/store"
)

// The hot path of identify: a conversation this replica served last time
// is found by the head of its session's log, which the log cache keeps
// (logcache.go), instead of the history index. The request's history must
// hold that head among its last chains; the index is then read only for
// the chains after it (the request's new messages: usually one, which no
// session holds), since a session holding more of the request would be
// the longer prefix (when that session is this one, grown on another replica,
// it is matched on the row read with the index); and the session is confirmed as usual (its row, one
// indexed read, and its log's identities, nothing read when the log did
// not grow). The index's read and the row's go in one round trip where
// the store can (Engine.HistoryAndRow), after the session was found not
// busy (a wait for its recording on this replica comes before both); or,
// when this replica's store holds the row its recording committed
// (heldRow), no read: the index's lookup then goes with PrepareContext's
// lock, which gives up, writing nothing, when a longer session exists
// (prepare matches again by the whole lookup).
// Whatever does not hold — another replica moved the session, a longer
// session exists, the session is busy or gone — falls back to the whole
// lookup.

// identifyServed joins the request to the session this replica last saw
// its history's head in; ok false to look it up in the index.
func (g *Gateway) identifyServed(ctx context.Context, tenant string, c *conversation, sig signal, noRepeat bool, until time.Time) (res resolved, ok bool, err error) {
	id, at := g.digests.headOf(tenant, c.chains, maxHeadProbe)
	if id == "" {
		return resolved{}, false, nil
	}
	if g.busy(ctx, tenant, id, wholeHistory(c), until) {
		return resolved{}, false, nil
	}
	hidden := resolved{id: id, named: sig.owns(id)}
	newChains := c.chains[at+1:]
	s, held := g.heldRow(tenant, id, c)
	logLen := int64(at + 1) // the log the request extends: up to the head this replica saw
	if !held {
		hits, row, err := g.cfg.Engine.HistoryAndRow(ctx, tenant, newChains, id)
		if errors.Is(err, store.ErrNotFound) {
			return resolved{}, false, nil // gone
		}
		if err != nil {
			return resolved{}, false, hideSession(err, hidden)
		}
		for _, h := range hits {
			switch {
			case h.Head && h.SessionID != id:
				return resolved{}, false, nil // a longer session
			case h.Head:
				// The session itself grew on another replica (a
				// balancer's turns): its head, which no other
				// session passes, is the longest prefix.
				logLen = h.Length
			}
		}
		s = row
	}
	m, err := g.matchRow(ctx, tenant, s, c, noRepeat)
	if err != nil || !m.extends || int64(len(m.log)) != logLen {
		// Moved since (it may no longer be the longest prefix), or not
		// taking the request: the whole lookup.
		return resolved{}, false, hideSession(err, hidden)
	}
	res, ok, err = g.join(ctx, tenant, id, c, sig, m)
	if ok && held {
		res.noHeads = newChains
	}
	return res, ok, hideSession(err, hidden)
}

// heldRow is the session's row as this replica's store last committed it
// (engine.HeldSession: PostgreSQL), to match the request against instead
// of reading it with the index's lookup of the request's new chains,
// which then goes with PrepareContext's lock (resolved.noHeads,
// engine.PrepareInput.NoHeads): the transaction gives up, writing
// nothing, when another session holds them as its head, and the request
// is matched again by the whole lookup (prepare). Not when the request
// changes the session's model, system prompt or tools: following them
// (join) writes before PrepareContext, so the index is read first, as
// before. The row is a guess the lock checks: a stale one is a version
// conflict, and the request is matched again. ok false when the fast
// path was given up for this request (c.noHeld) or nothing is held.
func (g *Gateway) heldRow(tenant, id string, c *conversation) (store.Session, bool) {
	if c.noHeld {
		return store.Session{}, false
	}
	s, ok := g.cfg.Engine.HeldSession(tenant, id)
	if !ok || len(followMask(s, c)) > 0 {
		return store.Session{}, false
	}
	return s, true
}
