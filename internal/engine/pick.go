package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// A pick is a client edit of the assistant turn at the end of the active
// view: the client's own version of the reply it was given (an Anthropic
// prefill merged with its continuation, or the continuation alone; the
// choice a Chat Completions client kept of n > 1) takes the place of the
// messages that turn was recorded as (the prefill and the reply). It is
// recorded like any client edit (tier client_edit, revertable, the
// originals kept in the log and expandable), but one version stands for
// several messages of the view, as a summary does.

// PickInput is a pick (ViewEdit.Pick): recorded in place of the view's
// last messages Replaced, in PrepareContext's transaction. When the view
// does not end with them (a compaction took them into a summary), nothing
// is written: the summary stands for them. Work: one count of one message;
// memory: the view after it.
type PickInput struct {
	// Replaced are the ids of the log messages the client's version
	// stands for, in order: they must be the active view's last messages.
	Replaced []string
	// Version is the client's version (its metadata is kept).
	Version chat.Message
}

// planPick plans in on view; nil when the view does not end with the
// messages it replaces. at says the session's model and the record's
// round.
func (e *Engine) planPick(ctx context.Context, view []chat.Message, in PickInput, at func() (string, int, error)) (*editPlan, error) {
	if len(in.Replaced) == 0 || in.Version.Role != chat.RoleAssistant {
		return nil, chat.Invalid("version", "a pick is an assistant message in place of at least one")
	}
	n := len(in.Replaced)
	if len(view) < n || !slices.Equal(idsOf(view[len(view)-n:]), in.Replaced) {
		return nil, nil
	}
	model, round, err := at()
	if err != nil {
		return nil, err
	}
	now := e.timestamp()
	m := in.Version
	m.ID, m.Position, m.Kind, m.Pinned, m.CreatedAt = fmt.Sprintf("edit_%d_1", round), 0, chat.KindNormal, false, now
	m.Replaces = slices.Clone(in.Replaced)
	m.Metadata = maps.Clone(m.Metadata)
	if m.Metadata == nil {
		m.Metadata = map[string]string{}
	}
	m.Metadata[EditOfMetadata] = in.Replaced[n-1] // the reply
	counted, err := e.recount(ctx, model, []chat.Message{m})
	if err != nil {
		return nil, err
	}
	tail := view[len(view)-n:]
	after := append(slices.Clone(view[:len(view)-n]), counted[0])
	rec := &store.Compaction{ID: fmt.Sprintf("cmp_%d", round), Round: round, Tiers: []string{ClientEditTier},
		CreatedAt: now, ExpiresAt: now.Add(e.revertWindow), ViewBefore: idsOf(view), ViewAfter: idsOf(after),
		TokensBefore: sumTokens(view), TokensAfter: sumTokens(after)}
	rec.Items = []store.CompactionItem{{Tier: ClientEditTier, NewID: counted[0].ID, Replaced: m.Replaces,
		Reason: "the client kept its own version of this reply", TokensBefore: sumTokens(tail), TokensAfter: counted[0].Tokens}}
	return &editPlan{counted: counted, after: after, rec: rec}, nil
}
