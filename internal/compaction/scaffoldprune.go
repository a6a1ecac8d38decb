package compaction

import (
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/contextd/contextd/internal/chat"
)

// ScaffoldOfKey is the metadata key of a stand-in for the original task or
// the latest user message whose scaffolding parts were pruned
// (pruneScaffolding): it names the message it stands in for, so Validate
// can check that everything else in it is unchanged.
const ScaffoldOfKey = "contextd_scaffold_of"

// ScaffoldNotesKey is the metadata key of a stand-in that lists, comma
// separated, the indexes of its parts that are contextd's notes: the
// others are the message's own, so what the person typed is told apart
// from the notes (StandInTyped).
const ScaffoldNotesKey = "contextd_scaffold_notes"

// pruneScaffolding is the last resort of a request that cannot fit: the
// text parts of the original task and the latest user message that are,
// all of them, blocks a client injects (chat.Scaffolding: Claude Code's
// <system-reminder> with the files it read again after /compact, ...) are
// replaced, largest first (the oldest first among equals), each by a short
// note naming the message's id for ExpandMessage, until the request fits.
// What the person typed, a part with anything but scaffolding in it and
// standing instructions stay verbatim; pinned messages are not touched.
// Each part is counted once and each changed message twice at most, so
// the work is linear in the two messages' text.
func (p *planner) pruneScaffolding() {
	type cand struct {
		msg, part int
		tokens    int64
	}
	var cands []cand
	for _, at := range scaffoldParts(p.view, p.req.OriginalTaskID) {
		if n := p.textTokens(p.view[at[0]].Parts[at[1]].Text); n >= minPruneTokens {
			cands = append(cands, cand{msg: at[0], part: at[1], tokens: n})
		}
	}
	sort.SliceStable(cands, func(a, b int) bool { return cands[a].tokens > cands[b].tokens })
	via := p.req.Policy.Expander()
	note := func(m *chat.Message, tokens int64) string {
		return "[contextd pruned a block of client context here (" + strconv.FormatInt(tokens, 10) +
			" tokens) so the request fits the window. " + ReadOn(via, m.ID, "it") + "]"
	}
	over := p.used() - p.req.Usable()
	if over <= 0 || len(cands) == 0 {
		return
	}
	// First the fewest parts whose saving (estimated from the parts'
	// counts) covers the excess; if the exact count of the changed
	// messages still does not fit, every candidate.
	build := func(all bool) (map[int]chat.Message, int64) {
		chosen := map[int]map[int]int64{} // message index → part index → tokens
		var saved int64
		for _, c := range cands {
			if !all && saved >= over {
				break
			}
			if chosen[c.msg] == nil {
				chosen[c.msg] = map[int]int64{}
			}
			chosen[c.msg][c.part] = c.tokens
			saved += c.tokens - p.textTokens(note(&p.view[c.msg], c.tokens))
		}
		out := map[int]chat.Message{}
		var delta int64
		for i, parts := range chosen {
			m := &p.view[i]
			repl := chat.Message{Role: m.Role, Name: m.Name, Kind: chat.KindPlaceholder, Metadata: maps.Clone(m.Metadata),
				Parts: append([]chat.Part(nil), m.Parts...)}
			if repl.Metadata == nil {
				repl.Metadata = map[string]string{}
			}
			repl.Metadata[ScaffoldOfKey] = m.ID
			isNote := noteParts(m) // a stand-in's notes stay notes
			for k, tokens := range parts {
				repl.Parts[k] = chat.Part{Type: chat.PartText, Text: note(m, tokens)}
				isNote[k] = true
			}
			notes := make([]string, 0, len(isNote))
			for _, k := range slices.Sorted(maps.Keys(isNote)) {
				notes = append(notes, strconv.Itoa(k))
			}
			repl.Metadata[ScaffoldNotesKey] = strings.Join(notes, ",")
			repl.Tokens = p.req.Count(&repl)
			delta += repl.Tokens - m.Tokens
			out[i] = repl
		}
		return out, delta
	}
	repls, delta := build(false)
	if delta > -over {
		repls, _ = build(true)
	}
	for _, i := range slices.Sorted(maps.Keys(repls)) {
		p.replace(i, repls[i], TierPrune, "client scaffolding of a message kept verbatim, so the request fits")
	}
}

// scaffoldParts returns where (message, part) the view's scaffolding parts
// that pruneScaffolding may prune are: the text parts of the original task
// and the latest user message (not pinned, not a summary or placeholder
// but a stand-in, whose blocks left may go in turn) that are all
// scaffolding and not standing instructions. One pass over
// the view and those two messages' text.
func scaffoldParts(view []chat.Message, originalTaskID string) [][2]int {
	latest := latestUserID(view)
	var out [][2]int
	for i := range view {
		m := &view[i]
		if m.Pinned || m.Kind != chat.KindNormal && !IsStandIn(m) || (m.ID != latest && m.ID != originalTaskID) {
			continue
		}
		for k, part := range m.Parts {
			if part.Type == chat.PartText && chat.Scaffolding(part.Text) && !chat.StandingInstructions(part.Text) {
				out = append(out, [2]int{i, k})
			}
		}
	}
	return out
}

// IsStandIn reports whether m is a stand-in (pruneScaffolding) for a
// message whose scaffolding was pruned.
func IsStandIn(m *chat.Message) bool {
	return m.Kind == chat.KindPlaceholder && m.Metadata[ScaffoldOfKey] != ""
}

// StandInTyped reports whether m is a stand-in (pruneScaffolding) that
// carries something the person wrote: chat.HumanAuthored of its parts
// other than its notes. Such a stand-in is what the person said
// (instructions), its notes set aside, and a stand-in of the original task
// is the original task (the engine's originalTask). One pass over its
// parts.
func StandInTyped(m *chat.Message) bool {
	if !IsStandIn(m) {
		return false
	}
	notes := noteParts(m)
	own := chat.Message{Role: m.Role}
	for k, part := range m.Parts {
		if !notes[k] {
			own.Parts = append(own.Parts, part)
		}
	}
	return chat.HumanAuthored(&own)
}

// noteParts returns the indexes of a stand-in's parts that are notes
// (ScaffoldNotesKey); none for any other message.
func noteParts(m *chat.Message) map[int]bool {
	notes := map[int]bool{}
	if !IsStandIn(m) {
		return notes
	}
	for _, f := range strings.Split(m.Metadata[ScaffoldNotesKey], ",") {
		if k, err := strconv.Atoi(f); err == nil {
			notes[k] = true
		}
	}
	return notes
}

// textTokens counts a text with CountText, or as a message of that text
// when the request has no CountText.
func (p *planner) textTokens(text string) int64 {
	if p.req.CountText != nil {
		return int64(p.req.CountText(text))
	}
	return p.req.Count(&chat.Message{Role: chat.RoleUser, Parts: []chat.Part{{Type: chat.PartText, Text: text}}})
}
