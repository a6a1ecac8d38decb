package engine

import (
	"context"
	"errors"
	"strconv"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/watch"
)

// Sessions stored before interrupted tool calls were recorded (see
// pairToolCalls) can hold an unanswered tool call followed by other
// messages in their active view (a view no provider accepts and no
// compaction plan passes), or, after one more append of that time, the
// interrupted result recorded after the messages that interrupted the call
// (a view providers reject: results must follow their call). PrepareContext
// and Compact repair such a view before they work on it, once, in a
// transaction of its own: each unanswered call gets the interrupted result
// an append records today, and a result further on is moved, both right
// after the call's assistant message and its results; the view is
// rewritten around them (a new view epoch and version; the log only grows).
// The repair is not a change of the request's: a call that then fails has
// still changed nothing it was asked to.

// errRepair rolls back PrepareContext's first transaction when the view it
// read needs the repair first.
var errRepair = errors.New("the active view holds interrupted tool calls without results")

// gap is an assistant message (by index in the view) whose tool calls are
// not all answered by the tool messages right after it although the
// conversation went on: calls without any result, and tool messages further
// on that answer its calls (an append made before the repair existed
// recorded the interrupted result after the messages that interrupted it).
type gap struct {
	at    int
	calls []string // without a result in the view
	moves []int    // view indices of tool messages that belong after at
}

// danglingCalls finds the gaps of a view. The calls of the last assistant
// message, with only tool results after it, are pending, not interrupted.
func danglingCalls(view []chat.Message) []gap {
	resultAt := map[string]int{} // call id → index of the message answering it
	owner := map[string]int{}    // call id → index of the message making it
	for i := range view {
		for _, p := range view[i].Parts {
			switch p.Type {
			case chat.PartToolResult:
				resultAt[p.ToolResult.ToolCallID] = i
			case chat.PartToolCall:
				owner[p.ToolCall.ID] = i
			}
		}
	}
	var out []gap
	for i := range view {
		if view[i].Role != chat.RoleAssistant {
			continue
		}
		end := i + 1
		for end < len(view) && view[end].Role == chat.RoleTool {
			end++
		}
		if end == len(view) {
			continue // pending
		}
		g := gap{at: i}
		moved := map[int]bool{}
		for _, p := range view[i].Parts {
			if p.Type != chat.PartToolCall {
				continue
			}
			at, ok := resultAt[p.ToolCall.ID]
			switch {
			case !ok:
				g.calls = append(g.calls, p.ToolCall.ID)
			case at > end && !moved[at] && answersOnly(&view[at], owner, i):
				moved[at] = true
				g.moves = append(g.moves, at)
			}
		}
		if len(g.calls) > 0 || len(g.moves) > 0 {
			out = append(out, g)
		}
	}
	return out
}

// answersOnly reports whether every result of m answers a call of the
// message at index i.
func answersOnly(m *chat.Message, owner map[string]int, i int) bool {
	for _, p := range m.Parts {
		if p.Type == chat.PartToolResult && owner[p.ToolResult.ToolCallID] != i {
			return false
		}
	}
	return m.Role == chat.RoleTool
}

// needsRepair reports, in one pass without allocating, whether a view may
// have gaps: an assistant message followed by fewer tool results than it
// made calls, and then by another message. A view without is never
// scanned further.
func needsRepair(view []chat.Message) bool {
	for i := 0; i < len(view); i++ {
		calls := 0
		if view[i].Role == chat.RoleAssistant {
			for _, p := range view[i].Parts {
				if p.Type == chat.PartToolCall {
					calls++
				}
			}
		}
		if calls == 0 {
			continue
		}
		results := 0
		j := i + 1
		for ; j < len(view) && view[j].Role == chat.RoleTool; j++ {
			for _, p := range view[j].Parts {
				if p.Type == chat.PartToolResult {
					results++
				}
			}
		}
		if j < len(view) && results < calls {
			return true
		}
		i = j - 1
	}
	return false
}

// repairInterrupted records an interrupted result for every gap of the
// session's active view and rewrites the view around them. It does nothing
// when the view has no gap (another caller repaired it first).
func (e *Engine) repairInterrupted(ctx context.Context, tenant, id string) error {
	var final store.Session
	repaired := false
	err := e.store.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		s, view, err := lockedView(ctx, tx, tenant, id)
		if err != nil {
			return err
		}
		gaps := danglingCalls(view)
		if len(gaps) == 0 {
			return nil
		}
		var callIDs []string
		for _, g := range gaps {
			callIDs = append(callIDs, g.calls...)
		}
		known, err := tx.ToolCalls(ctx, tenant, id, callIDs)
		if err != nil {
			return err
		}
		now := e.timestamp()
		inserts := map[int][]chat.Message{} // by the view index they go before
		moved := map[int]bool{}
		var added []chat.Message
		var calls []store.ToolCall
		for _, g := range gaps {
			at := g.at + 1
			for at < len(view) && view[at].Role == chat.RoleTool {
				at++
			}
			for _, k := range g.moves {
				inserts[at] = append(inserts[at], view[k])
				moved[k] = true
			}
			for _, callID := range g.calls {
				r, err := e.interrupted(s.Model, callID)
				if err != nil {
					return err
				}
				r.Position = s.LogCount + int64(len(added)) + 1
				r.ID, r.Kind, r.CreatedAt = "msg_"+strconv.FormatInt(r.Position, 10), chat.KindNormal, now
				added = append(added, r)
				inserts[at] = append(inserts[at], r)
				c, ok := known[callID]
				if !ok {
					c = store.ToolCall{CallID: callID, Position: view[g.at].Position}
				}
				c.ResultPosition = r.Position
				calls = append(calls, c)
			}
		}
		ids := make([]string, 0, len(view)+len(added))
		for i := 0; i <= len(view); i++ {
			for _, r := range inserts[i] {
				ids = append(ids, r.ID)
			}
			if i < len(view) && !moved[i] {
				ids = append(ids, view[i].ID)
			}
		}
		if len(added) > 0 {
			if err := tx.InsertMessages(ctx, tenant, id, added); err != nil {
				return err
			}
		}
		if err := tx.ReplaceView(ctx, tenant, id, ids); err != nil {
			return err
		}
		if len(calls) > 0 {
			if err := tx.PutToolCalls(ctx, tenant, id, calls); err != nil {
				return err
			}
		}
		s.LogCount += int64(len(added))
		s.ActiveCount, s.ViewSeq = int64(len(ids)), int64(len(ids))
		s.ActiveTokens += sumTokens(added)
		s.ActiveBytes += viewBytes(added)
		s.ViewEpoch++
		s.Version++
		s.UpdatedAt = now
		final, repaired = s, true
		return tx.UpdateSession(ctx, &s)
	})
	if err == nil && repaired {
		e.notify(ctx, tenant, id, final.Version, watch.EventUpdated)
		e.sweepViews(ctx, tenant, id)
	}
	return err
}
