package gateway

import (
	"context"
	"errors"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

// Prepare: the request's session is identified (identify.go) and what is
// new in it is appended through PrepareContext, which compacts when the
// session's policy says so; the view it returns is what goes upstream.

// prepare resolves the request's session and runs PrepareContext with
// what is new. The append expects the session at the version its log was
// matched at, so a message another replica appended meanwhile (the reply
// of the previous call, say) is never appended twice: the request is
// matched again, with a jittered backoff until the request's deadline
// (conflicts.go; a conversation that starts like many others may meet
// several that took the session it matched).
func (g *Gateway) prepare(ctx context.Context, tenant string, d door, c *conversation, sig signal) (resolved, engine.PrepareResult, string, error) {
	noRepeat := false
	var retry conflicts
	for {
		res, err := g.identify(ctx, tenant, d, c, sig, noRepeat)
		if errors.Is(err, store.ErrVersionConflict) && retry.again(ctx) {
			continue
		}
		if err != nil {
			return resolved{}, engine.PrepareResult{}, "", err
		}
		key := requestKey(res.id, c.digests)
		pin(res.fresh, c.pins)
		if err := g.replayLong(ctx, tenant, c, &res, key); err != nil {
			if errors.Is(err, store.ErrVersionConflict) && retry.again(ctx) {
				continue
			}
			g.unmake(ctx, tenant, res)
			return resolved{}, engine.PrepareResult{}, "", hideSession(err, res)
		}
		in := engine.PrepareInput{Messages: res.fresh}
		if len(res.fresh) > 0 {
			in.IdempotencyKey, in.ExpectedVersion = "gw-"+key, &res.version
		}
		prep, err := g.cfg.Engine.PrepareContext(ctx, tenant, res.id, in)
		if errors.Is(err, store.ErrVersionConflict) && retry.again(ctx) {
			g.unmake(ctx, tenant, res)
			continue
		}
		if err != nil {
			g.unmake(ctx, tenant, res)
			return resolved{}, engine.PrepareResult{}, "", hideSession(err, res)
		}
		if res.repeat > 0 {
			// Send the view without the replies this request does not
			// carry; if they are not its tail (a compaction moved them),
			// the request goes on in a session of its own.
			if !stripReplies(&prep, res.repeatD) {
				noRepeat = true
				continue
			}
		}
		return res, prep, key, nil
	}
}

// stripReplies removes the replies of digests from the end of the view.
func stripReplies(prep *engine.PrepareResult, digests [][32]byte) bool {
	view := prep.Messages
	if prep.Delta || len(view) < len(digests) {
		return false
	}
	tail := view[len(view)-len(digests):]
	for i := range tail {
		if tail[i].Kind != "" && tail[i].Kind != chat.KindNormal || identityOf(&tail[i]) != digests[i] {
			return false
		}
	}
	prep.Messages = view[:len(view)-len(digests)]
	return true
}
