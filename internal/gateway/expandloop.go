package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
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
//     contextd_expand call, are not shown. A streamed round is held until
//     its end while the request carries the tool (whether it ends in a
//     contextd_expand call is known only then), so with the tool exposed
//     a stream reaches the client when the model has finished; a round
//     sent without the tool (after the stop note) streams live.
//   - An answer that mixes contextd_expand with the client's tool calls is
//     not shown either: the expand calls are answered, the client's calls
//     get a result saying they were not run, and the model is asked again
//     (it makes its calls again with what it read).
//   - Bounds: the engine answers a round past its limit (default 3) with
//     a note telling the model to stop (Stop); the next request goes
//     without the tool (with tool_choice none when the client has no tools
//     of its own, as Anthropic needs tools defined once tool_use blocks are
//     in the conversation), so a turn takes at most limit+1 expand rounds
//     and limit+2 upstream calls (maxExpandRounds caps it whatever the
//     engine says). Each answer is at most the engine's byte cap; the
//     follow-up must fit what the prepared view left free of the window,
//     else the round's answers are replaced by a note and the loop stops.
//   - Recording: once the final answer reached the client, every upstream
//     call's usage goes into the ledger and the final reply into the log
//     (what the client saw, so its next request extends the log). A loop
//     that fails on the way (upstream error, an answer that cannot be
//     read, the client gone) records nothing.

// maxExpandRounds caps the expand rounds of one turn whatever the engine's
// limit (CONTEXTD_EXPAND_MAX_ROUNDS is meant to be far below it).
const maxExpandRounds = 32

// HeaderExpandRounds says how many contextd_expand rounds the gateway
// answered before the answer the client got.
const HeaderExpandRounds = "X-Contextd-Expand-Rounds"

// Notes for the model when the loop stops on contextd's side.
const (
	noteNotRun = "[contextd: this call was not run: it was made together with " + engine.ExpandToolName +
		", whose results are beside it. Make the call again if it is still needed.]"
	noteNoRoom = "[" + engine.ExpandToolName + ": the text does not fit in what is left of the context window. " +
		"Do not call " + engine.ExpandToolName + " again now: answer with what you have.]"
)

// expandLoop is one client request whose upstream requests carry the
// expand tool.
type expandLoop struct {
	g      *Gateway
	r      *http.Request
	d      door
	c      *conversation
	fields map[string]json.RawMessage
	tenant string
	id     string
	prep   engine.PrepareResult
	// extra are the messages appended after the view: each round's
	// assistant turn and the answers to its calls.
	extra  []chat.Message
	usages []usage
	rounds int
	// toolOn: the next request carries the expand tool.
	toolOn bool
}

// round is one upstream answer, read whole.
type round struct {
	resp  *http.Response
	body  []byte // the JSON body, or the SSE events to pass on
	sse   bool
	u     usage
	reply []chat.Message
}

// forwardExpanding runs the loop and relays the final answer; done records
// the usages of every upstream call and the final reply.
func (g *Gateway) forwardExpanding(w http.ResponseWriter, r *http.Request, d door, c *conversation, fields map[string]json.RawMessage,
	tenant, id string, prep engine.PrepareResult, done func([]usage, []chat.Message)) {
	ctx := r.Context()
	l := &expandLoop{g: g, r: r, d: d, c: c, fields: fields, tenant: tenant, id: id, prep: prep, toolOn: true}
	body := objectJSON(fields)
	for {
		resp, err := g.send(ctx, r, d, body)
		if err != nil {
			if ctx.Err() == nil {
				writeError(w, d.shape(), http.StatusBadGateway, errUpstream, "the provider could not be reached: "+upstreamReason(err))
			}
			return
		}
		if resp.StatusCode != http.StatusOK || !l.toolOn && isEventStream(resp.Header.Get("Content-Type")) {
			// The provider's error, or the last round, sent without the
			// tool: relayed as it comes, as without the loop.
			l.relay(w, resp, done)
			return
		}
		rd, err := l.read(resp)
		resp.Body.Close()
		if err != nil {
			if ctx.Err() == nil {
				writeError(w, d.shape(), http.StatusBadGateway, errUpstream, "the provider's answer could not be read: "+err.Error())
			}
			return
		}
		l.usages = append(l.usages, rd.u)
		calls := expandCalls(rd.reply)
		if calls == 0 {
			l.write(w, rd, done)
			return
		}
		if !l.toolOn || l.rounds == maxExpandRounds {
			// Sent without the tool, the model called it anyway: the
			// client must not see it.
			writeError(w, d.shape(), http.StatusBadGateway, errUpstream, "the model kept calling "+engine.ExpandToolName+" after it was told to stop")
			return
		}
		if body, err = l.next(ctx, rd.reply); err != nil {
			if ctx.Err() == nil {
				g.writeDomainError(ctx, w, d.shape(), err)
			}
			return
		}
	}
}

// send posts body upstream with the client's headers.
func (g *Gateway) send(ctx context.Context, r *http.Request, d door, body []byte) (*http.Response, error) {
	target := d.upstream(&g.cfg)
	if r.URL.RawQuery != "" {
		target += "?" + r.URL.RawQuery // e.g. Claude Code's ?beta=true
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	copyRequestHeaders(req.Header, r.Header)
	g.credentials(req.Header, d)
	return g.client.Do(req)
}

// relay passes an answer on as it comes (forward's path); a successful
// one is recorded with the rounds before it.
func (l *expandLoop) relay(w http.ResponseWriter, resp *http.Response, done func([]usage, []chat.Message)) {
	defer resp.Body.Close()
	l.setRounds(w)
	copyResponseHeaders(w.Header(), resp.Header)
	if resp.StatusCode != http.StatusOK {
		w.WriteHeader(resp.StatusCode)
		l.g.copyBody(l.r.Context(), w, resp.Body)
		return
	}
	l.g.relay(l.r.Context(), w, resp, l.d.stream(l.c), func(u usage, reply []chat.Message) {
		done(append(l.usages, u), reply)
	})
}

// read reads a whole answer: a JSON body (at most maxAnswerBytes), or an
// SSE stream followed event by event into a buffer of at most as much
// (the events the client is not to see, such as a usage chunk it did not
// ask for, left out).
func (l *expandLoop) read(resp *http.Response) (round, error) {
	rd := round{resp: resp}
	if !isEventStream(resp.Header.Get("Content-Type")) {
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
		if err != nil || len(b) > maxAnswerBytes {
			return rd, errors.New(upstreamReason(err))
		}
		rd.body = b
		rd.u, rd.reply = l.d.answer(b)
		return rd, nil
	}
	rd.sse = true
	buf := &sseBuffer{header: http.Header{}}
	complete := false
	l.g.relay(l.r.Context(), buf, resp, l.d.stream(l.c), func(u usage, reply []chat.Message) {
		rd.u, rd.reply, complete = u, reply, true
	})
	if !complete {
		return rd, errors.New("the stream ended before its last event")
	}
	rd.body = buf.b.Bytes()
	return rd, nil
}

// write passes the final round on to the client, then records.
func (l *expandLoop) write(w http.ResponseWriter, rd round, done func([]usage, []chat.Message)) {
	l.setRounds(w)
	copyResponseHeaders(w.Header(), rd.resp.Header)
	if !rd.sse {
		w.Header().Set("Content-Length", strconv.Itoa(len(rd.body)))
	}
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(rd.body); err != nil {
		return // the client did not get the answer: nothing to record
	}
	_ = http.NewResponseController(w).Flush()
	done(l.usages, rd.reply)
}

func (l *expandLoop) setRounds(w http.ResponseWriter) {
	if l.rounds > 0 {
		w.Header().Set(HeaderExpandRounds, strconv.Itoa(l.rounds))
	}
}

// next answers the calls of reply, appends the turn and the answers after
// the view, and returns the next request's body.
func (l *expandLoop) next(ctx context.Context, reply []chat.Message) ([]byte, error) {
	l.rounds++
	var results []chat.Message
	stop := l.rounds == maxExpandRounds
	for i := range reply {
		for _, p := range reply[i].Parts {
			if p.Type != chat.PartToolCall {
				continue
			}
			res := chat.ToolResult{ToolCallID: p.ToolCall.ID, Content: noteNotRun, IsError: true}
			if p.ToolCall.Name == engine.ExpandToolName {
				a, err := l.g.cfg.Engine.ExpandToolCall(ctx, l.tenant, l.id, p.ToolCall.Arguments, l.rounds)
				if err != nil {
					return nil, err
				}
				res.Content, res.IsError = a.Content, a.IsError
				stop = stop || a.Stop
			}
			results = append(results, chat.Message{Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult, ToolResult: &res}}})
		}
	}
	extra := append(append(l.extra[:len(l.extra):len(l.extra)], reply...), results...)
	fits, err := l.fits(ctx, extra)
	if err != nil {
		return nil, err
	}
	if !fits {
		for i := range results {
			results[i].Parts[0].ToolResult.Content, results[i].Parts[0].ToolResult.IsError = noteNoRoom, true
		}
		stop = true
		extra = append(append(l.extra[:len(l.extra):len(l.extra)], reply...), results...)
		if fits, err = l.fits(ctx, extra); err != nil {
			return nil, err
		} else if !fits {
			return nil, fmt.Errorf("the model's %s calls leave no room in the context window to answer them: %w", engine.ExpandToolName, compaction.ErrTooLarge)
		}
	}
	l.extra = extra
	if stop && l.toolOn {
		l.toolOn = false
		if err := withoutExpandTool(l.d, l.fields); err != nil {
			return nil, err
		}
	}
	view := append(l.prep.Messages[:len(l.prep.Messages):len(l.prep.Messages)], l.extra...)
	if err := l.d.build(l.fields, l.c, view, l.prep.Cache); err != nil {
		return nil, err
	}
	return objectJSON(l.fields), nil
}

// fits reports whether extra fits in what the prepared view left free of
// the usable window. Counted with the session's encoding; when that
// cannot count (a vocabulary not imported), by bytes, 3 to a token.
func (l *expandLoop) fits(ctx context.Context, extra []chat.Message) (bool, error) {
	free := l.prep.Status.Usage.Free
	n, err := l.g.cfg.Engine.CountTokens(ctx, engine.CountInput{Encoding: l.prep.Status.Usage.Encoding, Messages: extra})
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		var b int64
		for i := range extra {
			for _, p := range extra[i].Parts {
				b += int64(len(p.Text) + 64)
				if p.ToolCall != nil {
					b += int64(len(p.ToolCall.Arguments))
				}
				if p.ToolResult != nil {
					b += int64(len(p.ToolResult.Content))
				}
			}
		}
		return b/3 <= free, nil
	}
	return n.Total <= free, nil
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

// sseBuffer is a ResponseWriter that keeps what relay writes, at most
// maxAnswerBytes.
type sseBuffer struct {
	header http.Header
	b      bytes.Buffer
}

func (s *sseBuffer) Header() http.Header { return s.header }
func (s *sseBuffer) WriteHeader(int)     {}
func (s *sseBuffer) Write(p []byte) (int, error) {
	if s.b.Len()+len(p) > maxAnswerBytes {
		return 0, errors.New("answer over 64 MiB")
	}
	return s.b.Write(p)
}
