package compaction

import "github.com/contextd/contextd/internal/chat"

// instructions returns the ids of the view's messages that every tier keeps
// verbatim as what the person said: messages with standing instructions
// (chat.StandingInstructions), whatever their size, and human-authored user
// messages (chat.HumanAuthoredIn), newest first, while they fit in the
// policy's KeepHumanTokens. Older human messages beyond it are summarized
// like the rest (the summary's trail names each by id). Summaries and
// placeholders are contextd's, never the person's — except a stand-in whose
// scaffolding was pruned (pruneScaffolding): its own parts are the
// person's message, so it counts as human when something typed is among
// them (StandInTyped) and as standing instructions when those are. Work is
// one pass over the view and the text of its user messages.
func (p *planner) instructions() map[string]bool {
	if p.kept != nil {
		return p.kept
	}
	p.kept = map[string]bool{}
	human := chat.HumanAuthoredIn(p.view)
	left := p.req.Policy.KeepHumanTokens
	for i := len(p.view) - 1; i >= 0; i-- {
		m := &p.view[i]
		standIn := IsStandIn(m)
		if m.Role != chat.RoleUser || m.Kind == chat.KindSummary || (m.Kind == chat.KindPlaceholder && !standIn) {
			continue
		}
		switch {
		case chat.StandingInstructionsIn(m):
			p.kept[m.ID] = true
		case (standIn && StandInTyped(m) || !standIn && human[i]) && m.Tokens <= left:
			p.kept[m.ID] = true
			left -= m.Tokens
		}
	}
	return p.kept
}

// baseKept reports whether id is kept for another reason than being a
// person's message: pinned or the original task.
func (p *planner) baseKept(id string) bool {
	if id == p.req.OriginalTaskID {
		return true
	}
	for i := range p.view {
		if p.view[i].ID == id {
			return p.view[i].Pinned
		}
	}
	return false
}
