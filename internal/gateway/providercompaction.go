package gateway

import (
	"context"
	"encoding/json"
	"maps"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

// Provider compaction items (chat/providercompaction.go): a provider that
// compacted the conversation itself returns its compacted state as an
// item the client sends back — Anthropic's `compaction` block (in an
// assistant message; the API then ignores every block before the latest
// one) and the Responses `compaction` item of /v1/responses/compact (its
// encrypted_content; the client's next input starts from the compacted
// list). The gateway
//
//   - carries the item verbatim with its message (the client's bytes go
//     upstream, as every block the domain does not model) and counts it:
//     an Anthropic block's summary text; an encrypted item, which contextd
//     cannot read, as encryptedShare of its length, until the provider's
//     report anchors the view (engine/report.go);
//   - records the messages before the latest such item, the first time a
//     request carries it, as compacted by the provider (tier
//     engine.ProviderCompactionTier, a client-edit record): their new
//     versions count 0 tokens and are pinned, so the used % is what the
//     provider counts and contextd never summarizes or prunes what the
//     provider already dropped; they still go upstream as the client sent
//     them (build sends the client's blocks), since the client sent them.
//
// Work: one scan of the request's messages for the item, and one
// RecordClientEdits (after recordEdits': its view is cached) that records
// the view's messages before the item not yet recorded (once per
// compaction) and those recorded that the request's history no longer has
// an item after: bounded by the view, and its writes by the tenant's log
// quota (ErrResourceExhausted: not recorded, logged, the request goes on).

// compactionCarried is what a compaction item carries for counting, and
// whether the provider reads nothing before it. An Anthropic block (of an
// Anthropic message, anthropic: its "content" is its summary, null or
// left out when hidden — the door tells, not the key, which an SDK that
// omits null fields leaves out) is a block of its message, before which
// the API reads nothing; it counts its summary. A Responses item (no "content") stands for the items the
// compaction replaced, which the client no longer sends; what the input
// holds before it (the user messages the compaction kept) is read; it is
// framed as an item. What contextd cannot read — an encrypted_content of
// n bytes (base64), when there is no summary — counts 3n/16 tokens: its
// ciphertext is 3/4 of n bytes, about the size of the text it hides, at 4
// bytes a token.
func compactionCarried(it carriedItem, anthropic bool) (chat.CarriedText, bool) {
	var text string
	_ = json.Unmarshal(it.Content, &text)
	c := chat.CarriedText{Text: text, Item: !anthropic}
	if text == "" {
		c.Tokens = int64(len(it.EncryptedContent)) * 3 / 16
	}
	// A block with neither summary nor encrypted content (a failed
	// compaction) holds nothing the provider could read instead of the
	// history: the history before it is charged (counting it is the safe
	// side; not counting it, contextd would never compact it).
	return c, anthropic && (text != "" || it.EncryptedContent != "")
}

// recordProviderDrop records the messages of res's session that the
// request's latest provider compaction item leaves behind (those before
// its message, in the client's history) as dropped by the provider, and
// moves res to the version that leaves. A message recorded dropped that
// the request's history holds after its latest item, or with no item at
// all (the client rewound past the block, or keeps its message without
// it), is read by the provider again: recorded back, counted and no longer
// pinned by the drop. Like recordEdits, only a version conflict, a session
// gone or the client gone fails the request (recordClient). Work: one
// Client call per view message (the view recordEdits read, cached).
func (g *Gateway) recordProviderDrop(ctx context.Context, tenant string, c *conversation, res *resolved) (*store.Compaction, error) {
	from := chat.ProviderReadsFrom(c.msgs)
	reason := "the provider compacted the conversation after this message: it no longer reads it"
	if from == 0 {
		reason = "the client's history holds no provider compaction after this message: the provider reads it again"
	}
	return g.recordClient(ctx, tenant, c, res, engine.ClientEditInput{
		Client: func(stored *chat.Message) (chat.Message, bool) {
			if from == 0 && !stored.ProviderDropped() {
				return chat.Message{}, false // the usual case: a map lookup
			}
			n, _, ok := sentPlace(stored)
			client := clientOf(stored, c)
			if !ok || client == nil || stored.ProviderDropped() == (n-1 < from) {
				return chat.Message{}, false
			}
			m := clientCopy(stored, client)
			if n-1 < from {
				m.Metadata[chat.MetaProviderDropped] = "1"
				m.Pinned = true
				return m, true
			}
			delete(m.Metadata, chat.MetaProviderDropped)
			m.Pinned = false // the drop's pin; the client's own again:
			pin([]chat.Message{m}, c.pins)
			pinCompaction(&m)
			return m, true
		},
		Tier:   engine.ProviderCompactionTier,
		Reason: reason,
	}, "gateway provider compaction not recorded")
}

// dropFresh marks the messages about to be appended that are before the
// request's latest provider compaction item (a request whose earlier
// messages were never stored): appended counting nothing, pinned. fresh
// is c.msgs from index k on (identify), so fresh[i] is the request's
// message k+i.
func dropFresh(fresh []chat.Message, c *conversation, k int) {
	from := chat.ProviderReadsFrom(c.msgs)
	for i := range min(len(fresh), from-k) {
		m := &fresh[i]
		m.Metadata = maps.Clone(m.Metadata) // the door's memo may share it
		m.Metadata[chat.MetaProviderDropped] = "1"
		m.Pinned = true
	}
}

// compactionDigest is what a Responses item of type typ adds to its
// message's digest: a compaction item's own (two compacted inputs that
// differ only in it are not the same message), nothing for other items.
func compactionDigest(typ string, raw json.RawMessage) []string {
	if typ != "compaction" {
		return nil
	}
	return []string{sourceDigest(raw)}
}

// pinCompaction pins a message carrying a compaction block, the state the
// provider reads from: a summary of contextd's in its place would leave
// the provider reading the whole history again. A message that also calls
// tools is not pinned (a call and its results go together, pin.go): the
// tiers may then take it, with its results.
func pinCompaction(m *chat.Message) {
	if m.ProviderCompacted() && !hasToolCall(m) {
		m.Pinned = true
	}
}

// compactedCall reports whether the provider answered with a compaction
// block (reply: the call's answer). Anthropic leaves the compaction's own
// iteration out of the top-level usage, so the call's input tokens are of
// the compacted request (its system, tools and the summary), not of the
// view contextd sent: the call goes into the ledger, but neither anchors
// the session nor teaches the tenant's calibration of the model
// (engine/report.go). The next request, which carries the block, counts
// from it.
func compactedCall(reply []chat.Message) bool {
	for i := range reply {
		if reply[i].ProviderCompacted() {
			return true
		}
	}
	return false
}
