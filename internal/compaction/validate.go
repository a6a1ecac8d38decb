package compaction

import (
	"fmt"
	"maps"
	"reflect"

	"github.com/contextd/contextd/internal/chat"
)

// Validate checks a compacted view against the view it came from:
//   - every tool call has its results and every result its call (calls of
//     the last assistant message may still be pending, with nothing but
//     their own results after them);
//   - the first message is a user message;
//   - pinned messages, the original task and the latest user message of
//     the original view are present and unchanged (the original task and
//     the latest user message may stand behind a stand-in whose only
//     change is that parts all scaffolding are notes: sameButScaffolding).
//
// Fitting the window is checked by the planner, which knows the budget.
func Validate(before, after []chat.Message, originalTaskID string) error {
	if err := ValidatePairs(after); err != nil {
		return err
	}
	if len(after) > 0 && len(before) > 0 && before[0].Role == chat.RoleUser && after[0].Role != chat.RoleUser {
		return fmt.Errorf("the first message is a %s message, not a user message", after[0].Role)
	}
	latestUser := latestUserID(before) // or its stand-in (pruneScaffolding)
	// The few messages that must survive, by id; one pass over after
	// finds them (no index of the whole view).
	must := map[string]*chat.Message{}
	for i := range before {
		m := &before[i]
		if m.ID == originalTaskID || m.ID == latestUser || m.Pinned {
			must[m.ID] = m
		}
	}
	found := make(map[string]*chat.Message, len(must))
	standIn := map[string]*chat.Message{} // ScaffoldOfKey → its stand-in
	for i := range after {
		if _, ok := must[after[i].ID]; ok {
			found[after[i].ID] = &after[i]
		}
		if of, ok := after[i].Metadata[ScaffoldOfKey]; ok && after[i].Kind == chat.KindPlaceholder {
			standIn[of] = &after[i]
		}
	}
	for i := range before {
		m := &before[i]
		var what string
		switch {
		case m.ID == originalTaskID:
			what = "the original task"
		case m.ID == latestUser:
			what = "the latest user message"
		case m.Pinned:
			what = "a pinned message"
		default:
			continue
		}
		got, ok := found[m.ID]
		if s, pruned := standIn[m.ID]; !ok && pruned && !m.Pinned {
			if err := sameButScaffolding(m, s); err != nil {
				return fmt.Errorf("%s (%s) %w", what, m.ID, err)
			}
			continue
		}
		if !ok {
			return fmt.Errorf("%s (%s) was removed", what, m.ID)
		}
		if !reflect.DeepEqual(got, m) {
			return fmt.Errorf("%s (%s) was changed", what, m.ID)
		}
	}
	return nil
}

// ValidatePairs checks tool-call pairing in a view.
func ValidatePairs(view []chat.Message) error {
	calls := map[string]int{} // call id → index of its message
	answered := map[string]bool{}
	lastAssistant := -1
	for i, m := range view {
		if m.Role == chat.RoleAssistant {
			lastAssistant = i
		}
		for _, part := range m.Parts {
			switch part.Type {
			case chat.PartToolCall:
				if _, dup := calls[part.ToolCall.ID]; dup {
					return fmt.Errorf("tool call %q appears twice", part.ToolCall.ID)
				}
				calls[part.ToolCall.ID] = i
			case chat.PartToolResult:
				if _, ok := calls[part.ToolResult.ToolCallID]; !ok {
					return fmt.Errorf("message %s answers tool call %q, which no earlier message made", m.ID, part.ToolResult.ToolCallID)
				}
				if answered[part.ToolResult.ToolCallID] {
					return fmt.Errorf("tool call %q has two results", part.ToolResult.ToolCallID)
				}
				answered[part.ToolResult.ToolCallID] = true
			}
		}
	}
	// Calls of the last assistant message may be pending when only tool
	// results follow it: the runtime is about to run them.
	pendingOK := lastAssistant >= 0
	for _, m := range view[max(lastAssistant+1, 0):] {
		if m.Role != chat.RoleTool {
			pendingOK = false
		}
	}
	for id, at := range calls {
		if answered[id] || (at == lastAssistant && pendingOK) {
			continue
		}
		return fmt.Errorf("tool call %q (message %s) has no result", id, view[at].ID)
	}
	return nil
}

// sameButScaffolding checks the stand-in s of m (pruneScaffolding): the
// same role, name and metadata (but for the stand-in's own keys), part for
// part the same, except text parts of m that are all scaffolding (not
// standing instructions) replaced by a text part.
func sameButScaffolding(m, s *chat.Message) error {
	if s.Role != m.Role || s.Name != m.Name || len(s.Parts) != len(m.Parts) || !sameMetadataBut(m.Metadata, s.Metadata) {
		return fmt.Errorf("was changed beyond its scaffolding")
	}
	for k := range m.Parts {
		a, b := &m.Parts[k], &s.Parts[k]
		if reflect.DeepEqual(a, b) {
			continue
		}
		if a.Type != chat.PartText || b.Type != chat.PartText || !chat.Scaffolding(a.Text) || chat.StandingInstructions(a.Text) {
			return fmt.Errorf("was changed beyond its scaffolding (part %d)", k)
		}
	}
	return nil
}

// sameMetadataBut reports whether the stand-in's metadata s is m's with
// the stand-in's own keys (ScaffoldOfKey, ScaffoldNotesKey) set, whatever
// m held under them.
func sameMetadataBut(m, s map[string]string) bool {
	strip := func(x map[string]string) map[string]string {
		x = maps.Clone(x)
		delete(x, ScaffoldOfKey)
		delete(x, ScaffoldNotesKey)
		return x
	}
	return maps.Equal(strip(m), strip(s))
}
