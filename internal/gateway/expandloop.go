package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
)

// The contextd_expand loop. When the session's policy exposes the expand
// tool (PrepareResult.Tools), the gateway adds its definition to the
// upstream request and answers the model's calls of it itself: it appends
// the assistant turn and ExpandToolCall's answers to the upstream
// conversation (in the provider's shape, thinking blocks and reasoning
// items carried as the provider wrote them) and asks again, until an answer
// without contextd_expand calls. The client gets that final round only.
//
//   - What the client sees: the final round's answer as the provider sent
//     it (JSON body, or its SSE events in order), with its usage; the
//     rounds before it, and any text the model wrote before a
//     contextd_expand call, are not shown. Every round is held whole and
//     inspected (every choice, output item and event) before a byte goes
//     out, the round after the stop note too, so nothing the client gets
//     names the tool (expandguard.go): a stream reaches the client when the
//     model has finished, at most 64 MiB held per request.
//   - An answer that mixes contextd_expand with the client's tool calls is
//     not shown either: the expand calls are answered, the client's calls
//     get a result saying they were not run, and the model is asked again
//     (it makes its calls again with what it read).
//   - Bounds: the engine answers a round past its limit (default 3) with
//     a note telling the model to stop (Stop); the next request goes
//     without the tool (with tool_choice none when the client has no tools
//     of its own, as Anthropic needs tools defined once tool_use blocks are
//     in the conversation). At most maxExpandCalls calls of an answer run;
//     each answer must fit what the prepared view left free of the window
//     (each turn counted at least as its billed output tokens), else it
//     and the calls after it get a note and the loop stops.
//   - Last resort: a call the loop cannot answer (after the stop note, in
//     another choice, unreadable, no room even for the notes) re-asks once
//     with the view alone and the client's tools; only a second such
//     answer is a 502, in words that do not name the tool.
//   - Recording: every upstream call the provider answered goes into the
//     ledger on every way out; the final reply goes into the log once it
//     reached the client (what the client saw, so its next request
//     extends the log).

// maxExpandRounds caps the expand rounds of one turn whatever the engine's
// limit (CONTEXTD_EXPAND_MAX_ROUNDS is meant to be far below it).
const maxExpandRounds = 32

// maxExpandCalls caps the contextd_expand calls run for one answer: the
// rest get a note that they were not run.
const maxExpandCalls = 8

// Notes for the model when the loop stops on contextd's side.
var (
	noteNotRun = "[contextd: this call was not run: it was made together with " + engine.ExpandToolName +
		", whose results are beside it. Make the call again if it is still needed.]"
	noteTooMany = fmt.Sprintf("[contextd: this call was not run: at most %d %s calls are answered at a time. "+
		"Make it again if it is still needed.]", maxExpandCalls, engine.ExpandToolName)
	noteNoRoom = "[" + engine.ExpandToolName + ": the text does not fit in what is left of the context window. " +
		"Do not call " + engine.ExpandToolName + " again now: answer with what you have.]"
	noteUnreadable = "[" + engine.ExpandToolName + ": the text could not be read. Answer with what you have.]"
)

// errNoRoom: a round's answers do not fit even as notes.
var errNoRoom = errors.New("no room left in the context window")

// expandLoop is the loop over one exchange whose upstream requests carry
// the expand tool.
type expandLoop struct {
	x *exchange
	// extra are the messages appended after the view: each round's
	// assistant turn and the answers to its calls; used is their size in
	// tokens (at least each turn's output tokens as the provider billed
	// them, reasoning and thinking included).
	extra  []chat.Message
	used   int64
	usages []usage
	rounds int
	// toolOn: the next request carries the expand tool; viewOnly: the
	// request is the view alone, without the tool (the last resort).
	toolOn, viewOnly bool
}

// expand is forward's loop when the view offers the expand tool: it wraps
// roundTrip until an answer the client may see, and returns it held for
// relay (or the provider's error, or contextd's refusal), with the usage
// of every upstream call the provider answered, which record puts into
// the ledger on every way out. x.toolOn is false when the request cannot
// carry the tool (n > 1): the answer is still checked.
func (x *exchange) expand() answer {
	g, ctx := x.g, x.r.Context()
	if x.c.stream {
		// Held rounds keep the connection alive (keepalive.go).
		withoutToolHeaders(x.w.Header())
		x.w, x.stopKeepalive = startKeepalive(x.w, x.shape, g.cfg.StreamKeepalive)
	}
	l := &expandLoop{x: x, toolOn: x.toolOn}
	body := x.body
	for {
		rd, err := x.roundTrip(body)
		// Every call the provider answered goes into the ledger: an
		// answer read whole, and a stream cut before its last event with
		// what it carried, billed all the same (cutusage.go).
		if (err == nil && rd.status == http.StatusOK) || rd.u.ok {
			rd.u.added = l.used // what this request sent after the view
			l.usages = append(l.usages, rd.u)
		}
		if err != nil {
			return l.answer(nil, err)
		}
		if rd.status != http.StatusOK {
			return l.answer(&rd, nil) // the provider's error, checked by relay
		}
		s := inspect(x.d, &rd)
		calls := expandCalls(rd.reply)
		if calls == 0 && !s.first && !s.other && !s.unread {
			if echoed(x.d, x.client, &rd) {
				return l.answer(&rd, nil)
			}
			s.unread = true
		}
		answerable := calls > 0 && !s.other && !s.unread && l.toolOn && l.rounds < maxExpandRounds
		if answerable {
			body, err = l.next(ctx, rd)
			if err == nil {
				continue
			}
			if ctx.Err() != nil {
				return l.answer(nil, ctx.Err())
			}
			if !errors.Is(err, errNoRoom) {
				g.log.WarnContext(ctx, "gateway expand round failed", "session", x.res.id, "error", err.Error())
			}
		}
		// The model called the tool where it cannot be answered (after it
		// was taken away, in another choice, in a form not read, or with
		// no room left): ask once more with the view alone, without the
		// tool, as the request would have gone without the loop.
		if l.viewOnly {
			return l.answer(nil, refused(http.StatusBadGateway, errUpstream, "the provider's answer could not be used"))
		}
		if body, err = l.alone(); err != nil {
			return l.answer(nil, err)
		}
	}
}

// answer is the loop's answer for relay: held (the final round, or the
// provider's error) or err, with the loop's usages and rounds.
func (l *expandLoop) answer(held *round, err error) answer {
	return answer{held: held, err: err, usages: l.usages, rounds: l.rounds}
}

// alone is the request with the view alone and the client's own tools:
// the loop's last resort.
func (l *expandLoop) alone() ([]byte, error) {
	x := l.x
	l.viewOnly, l.toolOn, l.extra, l.used = true, false, nil, 0
	x.client.restore(x.rb.fields)
	if err := x.d.build(x.rb, x.c, x.prep.Messages, x.prep.Cache); err != nil {
		return nil, err
	}
	return x.rb.encode(), nil
}

// next answers the calls of a round (at most maxExpandCalls run, each only
// while what the round appends fits what the view left free of the
// window), appends the turn and the answers after the view, and returns
// the next request's body.
func (l *expandLoop) next(ctx context.Context, rd round) ([]byte, error) {
	l.rounds++
	stop := l.rounds == maxExpandRounds
	free := l.x.prep.Status.Usage.Free
	turn, err := l.size(ctx, rd.reply)
	if err != nil {
		return nil, err
	}
	used := l.used + max(turn, rd.u.output) // reasoning and thinking are billed as output
	var results []chat.Message
	ran, full := 0, false
	notes := map[string]int64{} // a note's size, counted once
	for i := range rd.reply {
		for _, p := range rd.reply[i].Parts {
			if p.Type != chat.PartToolCall {
				continue
			}
			res := chat.ToolResult{ToolCallID: p.ToolCall.ID, Content: noteNotRun, IsError: true}
			switch {
			case p.ToolCall.Name != engine.ExpandToolName:
			case full:
				res.Content = noteNoRoom
			case ran == maxExpandCalls:
				res.Content = noteTooMany
			default:
				ran++
				a, err := l.x.g.cfg.Engine.ExpandToolCall(ctx, l.x.tenant, l.x.res.id, p.ToolCall.Arguments, l.rounds)
				switch {
				case ctx.Err() != nil:
					return nil, ctx.Err()
				case err != nil:
					l.x.g.log.WarnContext(ctx, "gateway expand call failed", "session", l.x.res.id, "error", err.Error())
					res.Content = noteUnreadable
				default:
					res.Content, res.IsError = a.Content, a.IsError
					stop = stop || a.Stop
				}
			}
			msg := chat.Message{Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult, ToolResult: &res}}}
			n, counted := notes[res.Content]
			if !counted {
				if n, err = l.size(ctx, []chat.Message{msg}); err != nil {
					return nil, err
				}
				if res.IsError && res.Content != noteUnreadable {
					notes[res.Content] = n
				}
			}
			if used+n > free && res.Content != noteNoRoom {
				// Not room for this answer: a note instead, for it and
				// every call after it; the tool is taken away.
				full, stop = true, true
				res.Content, res.IsError = noteNoRoom, true
				if n, err = l.size(ctx, []chat.Message{msg}); err != nil {
					return nil, err
				}
			}
			used += n
			results = append(results, msg)
		}
	}
	if used > free {
		return nil, errNoRoom
	}
	l.used = used
	l.extra = append(append(l.extra[:len(l.extra):len(l.extra)], rd.reply...), results...)
	if stop && l.toolOn {
		l.toolOn = false
		if err := withoutExpandTool(l.x.d, l.x.rb.fields); err != nil {
			return nil, err
		}
	}
	view := append(l.x.prep.Messages[:len(l.x.prep.Messages):len(l.x.prep.Messages)], l.extra...)
	if err := l.x.d.build(l.x.rb, l.x.c, view, l.x.prep.Cache); err != nil {
		return nil, err
	}
	return l.x.rb.encode(), nil
}

// size counts msgs with the session's encoding (countWith).
func (l *expandLoop) size(ctx context.Context, msgs []chat.Message) (int64, error) {
	return l.x.g.countWith(ctx, l.x.prep.Status.Usage.Encoding, msgs)
}

// countWith counts msgs with encoding (count).
func (g *Gateway) countWith(ctx context.Context, encoding string, msgs []chat.Message) (int64, error) {
	return g.count(ctx, engine.CountInput{Encoding: encoding, Messages: msgs})
}

// count counts in; when that cannot count (a vocabulary not imported), by
// bytes, 3 to a token.
func (g *Gateway) count(ctx context.Context, in engine.CountInput) (int64, error) {
	n, err := g.cfg.Engine.CountTokens(ctx, in)
	if err == nil {
		return n.Total, nil
	}
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	return bytesTokens(in.System, in.Tools, in.Messages), nil
}

// bytesTokens is count's estimate when it cannot count: bytes, 3 to a
// token, with 64 bytes for each tool's and part's framing.
func bytesTokens(system string, tools []chat.Tool, msgs []chat.Message) int64 {
	b := int64(len(system))
	for _, t := range tools {
		b += int64(len(t.Name) + len(t.Description) + len(t.Parameters) + 64)
	}
	for i := range msgs {
		for _, p := range msgs[i].Parts {
			b += int64(len(p.Text) + 64)
			if p.ToolCall != nil {
				b += int64(len(p.ToolCall.Arguments))
			}
			if p.ToolResult != nil {
				b += int64(len(p.ToolResult.Content))
			}
		}
	}
	return b / 3
}

// expandCalls counts the contextd_expand calls of a reply.
func expandCalls(reply []chat.Message) int {
	n := 0
	for i := range reply {
		for _, p := range reply[i].Parts {
			if p.Type == chat.PartToolCall && p.ToolCall.Name == engine.ExpandToolName {
				n++
			}
		}
	}
	return n
}

// withExtraTools adds contextd's tool definitions after the client's, in
// the door's shape.
func withExtraTools(d door, fields map[string]json.RawMessage, tools []chat.Tool) error {
	var list []json.RawMessage
	if raw, ok := fields["tools"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &list); err != nil {
			return chat.Invalid("tools", "must be an array of tools")
		}
	}
	for _, t := range tools {
		list = append(list, d.toolJSON(t))
	}
	fields["tools"] = joinJSON(list)
	return nil
}

// withoutExpandTool takes the expand tool out of the request, or, when
// the client has no tools of its own, keeps it and sets tool_choice to
// none (a conversation with tool calls in it needs its tools defined).
func withoutExpandTool(d door, fields map[string]json.RawMessage) error {
	var list []json.RawMessage
	if err := json.Unmarshal(fields["tools"], &list); err != nil {
		return err
	}
	kept := list[:0]
	for _, t := range list {
		var n struct {
			Name     string `json:"name"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if json.Unmarshal(t, &n) == nil && (n.Name == engine.ExpandToolName || n.Function.Name == engine.ExpandToolName) {
			continue
		}
		kept = append(kept, t)
	}
	if len(kept) == 0 {
		fields["tool_choice"] = d.toolChoiceNone()
		return nil
	}
	fields["tools"] = joinJSON(kept)
	return nil
}
