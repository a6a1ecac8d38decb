package gateway

import (
	"context"
	"time"
)

// The hot path of identify: a conversation this replica served last time
// is found by the head of its session's log, which the log cache keeps
// (logcache.go), instead of the history index. The request's history must
// hold that head among its last chains; the index is then read only for
// the chains after it (the request's new messages: usually one, which no
// session holds), since a session holding more of the request would be
// the longer prefix; and the session is confirmed as usual (its row, one
// indexed read, and its log's identities, nothing read when the log did
// not grow). Whatever does not hold — another replica moved the session,
// a longer session exists, the session is busy or gone — falls back to
// the whole lookup.

// identifyServed joins the request to the session this replica last saw
// its history's head in; ok false to look it up in the index.
func (g *Gateway) identifyServed(ctx context.Context, tenant string, c *conversation, sig signal, noRepeat bool, until time.Time) (res resolved, ok bool, err error) {
	id, at := g.digests.headOf(tenant, c.chains, maxHeadProbe)
	if id == "" {
		return resolved{}, false, nil
	}
	if after := c.chains[at+1:]; len(after) > 0 {
		hits, err := g.cfg.Engine.FindHistory(ctx, tenant, after, 0)
		if err != nil {
			return resolved{}, false, err
		}
		for _, h := range hits {
			if h.Head {
				return resolved{}, false, nil
			}
		}
	}
	if g.busy(ctx, tenant, id, wholeHistory(c), until) {
		return resolved{}, false, nil
	}
	m, err := g.match(ctx, tenant, id, c, noRepeat)
	if err != nil || m == nil || !m.extends || len(m.log) != at+1 {
		// Gone, moved since (it may no longer be the longest prefix), or
		// not taking the request: the whole lookup.
		return resolved{}, false, hideSession(err, resolved{id: id, named: sig.owns(id)})
	}
	res, ok, err = g.join(ctx, tenant, id, c, sig, m)
	return res, ok, hideSession(err, resolved{id: id, named: sig.owns(id)})
}
