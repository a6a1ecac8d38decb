package gateway

import (
	"context"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
)

// A request that brings a long history into a session in one go (a fork, a
// conversation contextd has not seen, a client's --continue) would be one
// append past CONTEXTD_MAX_VIEW_WINDOWS times the window and refused on
// its own, on every later call too. It is fed instead in pieces of about a
// window each, cut between turns or tool rounds, each through PrepareContext, so
// the session is compacted between them like any other: the request is
// never refused because its replay is long.

// replayBytesPerToken is the byte count a piece is estimated with (text
// runs at 3 to 4 bytes a token; 3 errs on the side of smaller pieces).
const replayBytesPerToken = 3

// replayLong appends all but the last piece of res.fresh, when it is
// longer than about a window, and leaves the last piece in res.fresh at
// the session's new version. Each piece is appended at the version the
// one before left (ExpectedVersion), with no idempotency key: a retried
// request, or the same request on another replica, is matched again past
// the pieces that are stored and splits only what is left, so it appends
// each message once (a key naming the piece by its index would name other
// messages in a retry's split and refuse it). A client's compacted history
// (historyCompacted, clientcompaction.go) is never cut: its record goes with
// the append of the whole compacted history, in one transaction, and
// pieces appended apart would restart the session's client history at
// their first.
func (g *Gateway) replayLong(ctx context.Context, tenant string, c *conversation, res *resolved, edits *[]engine.ViewEdit) error {
	m, _ := g.cfg.Models.Lookup(c.model)
	budget := int64(m.ContextWindow) * replayBytesPerToken
	if budget <= 0 || len(res.fresh) < 2 || res.history == historyCompacted {
		return nil
	}
	pieces := splitReplay(res.fresh, budget)
	for _, p := range pieces[:len(pieces)-1] {
		prep, err := g.prepareEdited(ctx, tenant, res.id, engine.PrepareInput{Messages: p,
			ExpectedVersion: &res.version, Edits: *edits, Shared: res.shared, NoHeads: res.noHeads})
		if err != nil {
			return err
		}
		*edits, res.noHeads = nil, nil                  // recorded, and checked, with the first piece
		res.version, res.row = prep.Status.Version, nil // the row the match read is behind now
	}
	res.fresh = pieces[len(pieces)-1]
	return nil
}

// splitReplay cuts msgs into pieces of at most budget bytes (a message
// larger than that is a piece of its own), each after the first starting
// with a user message or with an assistant message after tool results (an
// agent's history is one task and then rounds of calls and results), so no
// piece leaves a tool call's results to the next one.
func splitReplay(msgs []chat.Message, budget int64) [][]chat.Message {
	var out [][]chat.Message
	start, size := 0, int64(0)
	cut := -1 // the last place to cut after start
	for i := range msgs {
		if i > start && (msgs[i].Role == chat.RoleUser || msgs[i].Role == chat.RoleAssistant && msgs[i-1].Role == chat.RoleTool) {
			cut = i
		}
		size += messageSize(&msgs[i])
		if size > budget && cut > start {
			out = append(out, msgs[start:cut])
			start, cut = cut, -1
			size = 0
			for j := start; j <= i; j++ {
				size += messageSize(&msgs[j])
			}
		}
	}
	return append(out, msgs[start:])
}

// messageSize is the bytes of what a message says.
func messageSize(m *chat.Message) int64 {
	n := int64(16)
	for _, p := range m.Parts {
		n += int64(len(p.Text))
		if p.ToolCall != nil {
			n += int64(len(p.ToolCall.Arguments) + len(p.ToolCall.Name))
		}
		if p.ToolResult != nil {
			n += int64(len(p.ToolResult.Content))
		}
	}
	return n
}
