package gateway

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

// Client edits (engine/clientedit.go): a request that resends a message of
// its session's active view in another version than the stored one (same
// identity and place in the history, other content: Qwen Code's cleared
// tool results, Claude Code's schema defaults filled into old tool calls)
// is the same conversation, and the client's version is recorded as an
// edit of that message, in the transaction that appends the request's new
// messages and before them (viewEdits), so the used percentage and this request's compaction decision count what
// the client sends. What goes upstream for it was already the client's
// bytes (asSent).

// maxClientEdits bounds the messages one request records client versions
// of; more wait for the client's next request (which resends them). With
// it, a request's edit work is one comparison per view message (the
// digests already held) and at most 64 messages counted and written.
const maxClientEdits = 64

// editShare is the share of the model's window (at 4 bytes a token) the
// edits a request finds must change before they are recorded: 1/200, half
// a percent of the used %, so a client that changes a few bytes of many
// old messages (Claude Code's "replace_all": false, 21 bytes a call) has
// them recorded together, not with a rewrite of the view on every call
// (which also voids a background compaction planned on the view). Qwen
// Code's cleared results change kilobytes at once: recorded at once.
const editShare = 200

// minEditBytes is what the edits of a request to model must change before
// they are recorded (engine.ClientEditInput.MinBytes).
func (g *Gateway) minEditBytes(model string) int64 {
	m, _ := g.cfg.Models.Lookup(model)
	return max(256, int64(m.ContextWindow)*4/editShare)
}

// viewEdits are the edits a request records with its append
// (engine.PrepareInput.Edits, in PrepareContext's own transaction, so a
// request that fails records none): the client's version of the last
// reply (picks.go), the client's versions of the stored messages of res's
// session, and what a provider's compaction dropped
// (providercompaction.go). A session this request made, or a repeat
// answered from the session, has nothing to record.
func (g *Gateway) viewEdits(c *conversation, res *resolved) []engine.ViewEdit {
	if res.made || res.notStored() || len(c.chains) != len(c.msgs) {
		return nil
	}
	if res.history == historyCompacted {
		// The client's compaction of its history (clientcompaction.go):
		// the whole view, recorded alone; nothing else of it is the
		// client's version of a message the view holds.
		return []engine.ViewEdit{{Compaction: &engine.ClientCompactionInput{}}}
	}
	var out []engine.ViewEdit
	if p := pickEdit(c, res); p != nil {
		out = append(out, engine.ViewEdit{Pick: p})
	}
	return append(out,
		engine.ViewEdit{Client: &engine.ClientEditInput{
			Client:   func(stored *chat.Message) (chat.Message, bool) { return clientVersion(stored, c) },
			Max:      maxClientEdits,
			MinBytes: g.minEditBytes(c.model),
		}},
		engine.ViewEdit{Client: providerDrops(c)})
}

// prepareEdited runs PrepareContext with in's edits. When they would take
// the tenant past a limit (its log quota: engine.ErrResourceExhausted),
// the client's versions of stored messages and the provider's drops are
// left out (logged) and the call is made again: recording them is not
// what the client asked for, their messages go upstream as sent (asSent),
// and a later request records them (they are found again). A pick is
// never left out: the request joined the session by it, and its first new
// message says so to the log cache of every replica (metaPicked), so
// without it the view would hold the gateway's version of the reply (the
// first of n choices) in the client's place, upstream and for good. A
// request whose pick the quota cannot take fails, changing nothing
// (TestEditsPastTheLogQuota).
func (g *Gateway) prepareEdited(ctx context.Context, tenant, id string, in engine.PrepareInput) (engine.PrepareResult, error) {
	prep, err := g.cfg.Engine.PrepareContext(ctx, tenant, id, in)
	if !errors.Is(err, engine.ErrResourceExhausted) {
		return prep, err
	}
	var picks []engine.ViewEdit // and a client compaction, which its first message names too (clientcompaction.go)
	for _, ed := range in.Edits {
		if ed.Pick != nil || ed.Compaction != nil {
			picks = append(picks, ed)
		}
	}
	if len(picks) == len(in.Edits) {
		return prep, err
	}
	g.log.WarnContext(ctx, "gateway client edits not recorded", "session", id, "error", err.Error())
	in.Edits = picks
	return g.cfg.Engine.PrepareContext(ctx, tenant, id, in)
}

// clientVersion is the request's message at stored's place in the
// client's history when what it says differs from the stored copy (its
// digest: cache marks, key order and thinking do not count, as they are
// not counted either).
func clientVersion(stored *chat.Message, c *conversation) (chat.Message, bool) {
	client, same := c.sentOf(stored) // assent.go: looked up once a request, for asSent too
	if client == nil || same {
		return chat.Message{}, false // not the client's, or the same bytes as stored (the usual case)
	}
	if d := stored.Metadata[metaDigest]; d != "" && d == client.Metadata[metaDigest] || storedDigest(stored) == storedDigest(client) {
		return chat.Message{}, false // the usual case, found by the digests' text
	}
	m := clientCopy(stored, client)
	m.Parts = slices.Clone(m.Parts) // the door's memo shares them
	return m, true
}

// clientOf is the request's message at the place of a stored message of
// the view in the client's history (nil when the request has none there:
// the message is not the client's, or the request's history is another).
// The place is read without decoding the chain (every message of the view
// is looked up on every request: once, by sentOf, for the edits' planning
// and asSent): equal to the request's chain there, it is a chain.
func clientOf(stored *chat.Message, c *conversation) *chat.Message {
	if n := clientAt(stored, c); n > 0 {
		return &c.msgs[n-1]
	}
	return nil
}

// clientAt is clientOf's place: the client's message n (1-based), 0 when
// the request has none at stored's place.
func clientAt(stored *chat.Message, c *conversation) int {
	n, chain, ok := sentPlace(stored)
	if !ok || n > len(c.msgs) || len(c.chains) != len(c.msgs) || c.chains[n-1] != chain {
		return 0
	}
	return n
}

// sentPlace is the place in the client's history (store.HistoryMetadata:
// its length there and chain) of a message of the view: an original's,
// or that of the original a client edit stands for (it has no log
// position of its own); not a summary's or a placeholder's, which keep
// their original's metadata.
func sentPlace(m *chat.Message) (n int, chain string, ok bool) {
	if m.Kind != "" && m.Kind != chat.KindNormal || m.Position <= 0 && m.Metadata[engine.EditOfMetadata] == "" {
		return 0, "", false
	}
	l, chain, ok := strings.Cut(m.Metadata[store.HistoryMetadata], ":")
	n, err := strconv.Atoi(l)
	if !ok || err != nil || n <= 0 {
		return 0, "", false
	}
	return n, chain, true
}
