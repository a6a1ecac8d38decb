package engine

import (
	"cmp"
	"fmt"
	"strconv"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// A client compaction is a compaction by the client of its whole history:
// Codex CLI's auto-compaction, a Responses input after
// /v1/responses/compact, Claude Code's /compact. The client's next request
// is a new, short history (what it kept, its summary or the provider's
// compaction item, the next prompt) that no longer extends the session's
// log. The gateway recognizes it (gateway/clientcompaction.go) and records
// it in the same session, in PrepareContext's transaction
// (ViewEdit.Compaction): it covers the whole active view (every message
// the client no longer sends as the session holds it; the log keeps the
// originals, byte for byte, expandable), recorded as a compaction of tier
// "client_compaction" (RevertCompaction restores the view before it,
// keeping what was appended since), and the same call appends the
// client's new history, which is what the view holds and what the used
// percentage counts.

// ClientCompactionTier names the record of a client's compaction of its
// history.
const ClientCompactionTier = "client_compaction"

// ClientCompactionInput is a client compaction (ViewEdit.Compaction): it
// empties the active view, recorded as one compaction of tier
// ClientCompactionTier whose items name each message it covers (a client
// edit's original; a summary or placeholder of contextd's by itself), each
// with the log's next position as its new message (the first of the
// compacted history the call appends), so a purge keeps the originals
// while that message is kept. An empty view records nothing. Work: the
// record (one item per view message); nothing is counted or copied.
type ClientCompactionInput struct {
	// Reason names the record's items (default: the client compacted its
	// history and no longer sends this message).
	Reason string
}

// planClientCompaction plans the record of a client's compaction of view,
// on session s (its round and log count: the items' new message is the
// log's next one, the first of the compacted history appended after it,
// so retention keeps the originals while it is kept: store.Retained's
// edges); nil for an empty view.
func (e *Engine) planClientCompaction(view []chat.Message, in ClientCompactionInput, s *store.Session) *editPlan {
	if len(view) == 0 {
		return nil
	}
	round := s.CompactionRound + 1
	now := e.timestamp()
	reason := cmp.Or(in.Reason, "the client compacted its history and no longer sends this message")
	next := "msg_" + strconv.FormatInt(s.LogCount+1, 10)
	rec := &store.Compaction{ID: fmt.Sprintf("cmp_%d", round), Round: round, Tiers: []string{ClientCompactionTier},
		CreatedAt: now, ExpiresAt: now.Add(e.revertWindow), ViewBefore: idsOf(view), ViewAfter: []string{},
		TokensBefore: sumTokens(view)}
	for i := range view {
		m := &view[i]
		orig := m.ID
		if o := m.Metadata[EditOfMetadata]; o != "" {
			orig = o // a client edit stands for the log's original
		}
		rec.Items = append(rec.Items, store.CompactionItem{Tier: ClientCompactionTier, NewID: next, Replaced: []string{orig},
			Reason: reason, TokensBefore: m.Tokens})
	}
	return &editPlan{rec: rec}
}
