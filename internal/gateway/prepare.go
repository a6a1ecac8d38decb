package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

// Prepare: the request's session is identified (identify.go) and what is
// new in it is appended through PrepareContext, which compacts when the
// session's policy says so; the view it returns is what goes upstream.

// prepare is the stage (exchange.go): the session resolved and
// PrepareContext run (prepare below), and the view written into the
// request's body in the door's shape, with contextd's tool definitions
// when the expand loop runs, and contextd's headers set. A request the
// provider holds the conversation of (c.passthrough) is forwarded as it
// came, with a warning saying so.
func (x *exchange) prepare() bool {
	g, w, ctx, c := x.g, x.w, x.r.Context(), x.c
	if c.passthrough != "" {
		w.Header().Add(HeaderWarning, c.passthrough)
		x.body = x.rb.raw // as the client sent it
		return true
	}
	if _, known := g.cfg.Models.Lookup(c.model); !known {
		w.Header().Add(HeaderWarning, fmt.Sprintf("model %q is not in contextd's registry: counted with the default window and encoding (approximate); add it with CONTEXTD_MODELS_FILE", c.model))
	}
	pins, err := pinMarkers(x.r.Header.Values(HeaderPin))
	if err != nil {
		g.writeDomainError(ctx, w, x.shape, err)
		return false
	}
	c.pins = pins
	res, prep, key, err := g.prepare(ctx, x.tenant, x.d, c, x.sig, g.waitsUntil(x.arrived))
	if err != nil {
		g.writeDomainError(ctx, w, x.shape, err)
		return false
	}
	g.digests.extend(x.tenant, res.id, res.created, storedTail(prep.Messages, res.fresh))
	prep.Messages = asSent(prep.Messages, c)
	x.res, x.prep, x.key = res, prep, key
	x.client = toolsOf(x.rb.fields)
	x.expanding = len(prep.Tools) > 0
	x.toolOn = x.expanding && !manyChoices(x.rb.fields)
	if x.expanding && !x.toolOn {
		w.Header().Add(HeaderWarning, "n > 1: the expand tool is not offered (one answer is expanded at a time)")
	}
	if x.toolOn {
		if err := withExtraTools(x.d, x.rb.fields, prep.Tools); err != nil {
			g.writeDomainError(ctx, w, x.shape, err)
			return false
		}
	}
	if err := x.d.build(x.rb, c, prep.Messages, prep.Cache); err != nil {
		g.writeDomainError(ctx, w, x.shape, err)
		return false
	}
	x.body = x.rb.encode()
	h := w.Header()
	if res.named {
		// Only a session the caller named, or its signal derives, or this
		// request made: never one a stranger's conversation made.
		h.Set(HeaderSession, res.id)
	}
	h.Set(HeaderHistory, res.history)
	if res.from != "" {
		h.Set(HeaderHistory, res.history+"; from="+res.from)
	}
	if res.history != historyAside { // an aside is not the session's view (summaryrequest.go)
		h.Set(HeaderUsed, strconv.FormatFloat(prep.Status.Usage.PercentUsed, 'f', 1, 64))
	}
	if res.own {
		// Sent as the client sent it (slimmedaside.go): the answer says
		// nothing of the session's view, none of which was sent — no
		// X-Contextd-Compacted, no X-Contextd-Used-Percent, none of the
		// session's status warnings (a compaction deferred or paused,
		// auto_compact off); warnings of the request itself still come
		// (TestSlimmedSummaryRequestHeaders).
		return true
	}
	h.Set(HeaderCompacted, strconv.FormatBool(prep.Status.Compacted))
	for _, warn := range prep.Status.Warnings {
		h.Add(HeaderWarning, headerSafe(warn))
	}
	return true
}

// prepare resolves the request's session and runs PrepareContext with
// what is new. The append expects the session at the version its log was
// matched at, so a message another replica appended meanwhile (the reply
// of the previous call, say) is never appended twice: the request is
// matched again, with a jittered backoff until the request's deadline
// (conflicts.go; a conversation that starts like many others may meet
// several that took the session it matched). The client's edits are
// recorded in the same transaction as the append: a request that fails
// changes nothing.
func (g *Gateway) prepare(ctx context.Context, tenant string, d door, c *conversation, sig signal, until time.Time) (resolved, engine.PrepareResult, string, error) {
	noRepeat := false
	var retry conflicts
	for {
		res, err := g.identify(ctx, tenant, d, c, sig, noRepeat, until) // every identify waits by the request's one deadline
		if (errors.Is(err, store.ErrVersionConflict) || errors.Is(err, store.ErrNotFound)) && retry.again(ctx) {
			continue
		}
		if err != nil {
			return resolved{}, engine.PrepareResult{}, "", err
		}
		key := requestKey(res.id, c.digests)
		pin(res.fresh, c.pins)
		dropFresh(res.fresh, c, len(c.msgs)-len(res.fresh)) // providercompaction.go
		// The client's edits, and its compaction of its history
		// (clientcompaction.go), go with the first append (clientedit.go).
		edits := g.viewEdits(c, &res)
		if err := g.replayLong(ctx, tenant, c, &res, &edits); err != nil {
			if staleHeld(err, c, res) {
				c.noHeld = true
				continue
			}
			if errors.Is(err, store.ErrVersionConflict) && retry.again(ctx) {
				continue
			}
			g.unmake(ctx, tenant, res)
			return resolved{}, engine.PrepareResult{}, "", hideSession(err, res)
		}
		in := engine.PrepareInput{Messages: res.fresh, NoLedger: true, Read: res.row, Edits: edits, Shared: res.shared, // the gateway sends no ledger; the row its match read
			NoHeads: res.noHeads}
		// No idempotency key: a request that lost the race to append (a
		// retry, or the same request on another replica) conflicts on the
		// version its history was matched at and is matched again, where
		// its messages are found stored, so nothing is appended twice
		// without a key's read and write.
		if len(res.fresh) > 0 || len(edits) > 0 {
			in.ExpectedVersion = &res.version
		}
		prep, err := g.prepareEdited(ctx, tenant, res.id, in) // clientedit.go
		if staleHeld(err, c, res) {
			c.noHeld = true
			continue
		}
		if errors.Is(err, store.ErrVersionConflict) && retry.again(ctx) {
			g.unmake(ctx, tenant, res)
			continue
		}
		if errors.Is(err, store.ErrNotFound) && retry.again(ctx) {
			// The session matched (or just made) was closed in between
			// (idle past CONTEXTD_GATEWAY_SESSION_TTL, or deleted): match
			// again, which starts a new session from the request's
			// history.
			continue
		}
		if err != nil {
			g.unmake(ctx, tenant, res)
			return resolved{}, engine.PrepareResult{}, "", hideSession(err, res)
		}
		// A request sent as its client sent it (res.own) sends nothing
		// of the log, so the log moving changes nothing it sends: matched
		// again, it would spend the budget and then go as a session of
		// its own, which the slimmed aside is there to avoid.
		if err := logMoved(res, prep); err != nil && !res.own {
			// Appended nothing, so nothing expected its version: match
			// again (the request is now a repeat of the reply that came
			// in between, say). Past the budget an aside goes as an
			// extension (recorded, its version expected).
			if retry.again(ctx) {
				continue
			}
			if res.history == historyAside {
				noRepeat = true
				continue
			}
			return resolved{}, engine.PrepareResult{}, "", hideSession(err, res)
		}
		if err := g.claimJoined(ctx, tenant, res, prep); err != nil { // failedmade.go
			if (errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrVersionConflict)) && retry.again(ctx) {
				continue
			}
			return resolved{}, engine.PrepareResult{}, "", hideSession(err, res)
		}
		if res.notStored() {
			// Send the view without the replies this request does not
			// carry; if they are not its tail (a compaction moved them),
			// the request goes on in a session of its own.
			if res.own {
				sendOwn(&prep, res) // slimmedaside.go
				return res, prep, key, nil
			}
			view := prep.Messages
			if !stripReplies(&prep, res.repeatD) {
				noRepeat = true
				continue
			}
			fits, err := g.asideFits(ctx, c, prep, res.tail, view[len(prep.Messages):]) // summaryrequest.go
			if err != nil {
				return resolved{}, engine.PrepareResult{}, "", err
			}
			if !fits {
				noRepeat = true
				continue
			}
			prep.Messages = append(prep.Messages[:len(prep.Messages):len(prep.Messages)], res.tail...)
		}
		return res, prep, key, nil
	}
}

// logMoved is ErrVersionConflict when the request appended nothing to
// the session it joined and PrepareContext found the log other than the
// match did (longer, or another incarnation): another request's messages
// came in between (the reply of its twin, whose call was answered and
// recorded meanwhile, on this replica or another). The view holds them,
// though the request does not. Its history the log (unchanged, or a
// pick): its answer is not the session's next turn, and recorded with
// the log count PrepareContext returned it would be appended after them
// (the twin's reply stored twice). An aside that extends the log
// (summaryrequest.go): the view and its new messages would send them
// twice. An append is checked by its ExpectedVersion instead; a repeat,
// and an aside that leaves out the log's last messages, are sent without
// those (stripReplies), which checks the view's tail.
func logMoved(res resolved, prep engine.PrepareResult) error {
	if res.row == nil || len(res.fresh) > 0 || res.repeat > 0 {
		return nil
	}
	if prep.Status.LogCount == res.row.LogCount && prep.Status.Created.Equal(res.row.CreatedAt) {
		return nil
	}
	return fmt.Errorf("session %q: its log moved from %d to %d messages while the request was prepared: %w",
		res.id, res.row.LogCount, prep.Status.LogCount, store.ErrVersionConflict)
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

// manyChoices reports whether the request asks for more than one choice
// (Chat Completions' n).
func manyChoices(fields map[string]json.RawMessage) bool {
	var n float64
	return json.Unmarshal(fields["n"], &n) == nil && n > 1
}

// requestKey is the digest of a request's whole history in its session:
// what names the ids of its answer's calls (answerSeed), so the same
// request again gets the same.
func requestKey(id string, digests [][32]byte) string {
	h := sha256.New()
	fmt.Fprintf(h, "%d:%s:%d:", len(id), id, len(digests))
	for _, d := range digests {
		h.Write(d[:])
	}
	return hex.EncodeToString(h.Sum(nil)[:20])
}

// headerSafe keeps a header value to printable ASCII.
func headerSafe(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c < ' ' || c > '~' {
			b[i] = '?'
		}
	}
	if len(b) > 512 {
		b = append(b[:509], "..."...)
	}
	return string(b)
}

// storedTail is the stored copies of fresh at the end of view (they carry
// their log positions), or nil when the view does not end with them.
func storedTail(view, fresh []chat.Message) []chat.Message {
	if len(fresh) == 0 || len(view) < len(fresh) {
		return nil
	}
	tail := view[len(view)-len(fresh):]
	for i := range tail {
		if storedDigest(&tail[i]) != storedDigest(&fresh[i]) {
			return nil
		}
	}
	return tail
}

// staleHeld says whether err is a PrepareContext that started from the
// held row the match took (lastserved.go: res.noHeads) and found it was
// not the match: another session holds the request's new chains as its
// head (store.ErrLongerSession), or the row was stale — another replica
// appended to the session or closed it since (a version conflict, not
// found; a conversation a load balancer sends to each replica in turn
// meets this on every request). Nothing was written: the request is
// matched again by the index (c.noHeld), at once, once, outside the
// conflicts' budget and its backoff, as the read the held row replaced
// would have sent it to the whole lookup at once (the caller sets
// c.noHeld and matches again).
func staleHeld(err error, c *conversation, res resolved) bool {
	return res.noHeads != nil && !c.noHeld && (errors.Is(err, store.ErrLongerSession) ||
		errors.Is(err, store.ErrVersionConflict) || errors.Is(err, store.ErrNotFound))
}
