package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// Relay: the fifth stage of a door's request (exchange.go). What forward
// has for the client goes out: the provider's status, headers (but
// hop-by-hop ones, headers.go) and body unchanged, SSE event by event as
// it arrives, plus contextd's headers; or the expand loop's final round,
// or the provider's error, held whole (and checked: nothing names the
// expand tool, expandguard.go); or contextd's refusal in the door's error
// shape. Just before the last byte of an answer that goes out whole, its
// recording starts (answering, record.go), so the client's next request,
// which may come as soon as it has that byte, waits for the recording,
// and the recording never waits for the client to read that byte. An answer that did not reach the client whole
// (an upstream error, a stream that ended before its last event) has no
// reply to record; such a stream's usage is recorded as an estimate
// (cutusage.go).

// maxAnswerBytes bounds a non-streamed answer the gateway reads to record.
const maxAnswerBytes = 64 << 20

// HeaderExpandRounds says how many contextd_expand rounds the gateway
// answered before the answer the client got.
const HeaderExpandRounds = "X-Contextd-Expand-Rounds"

// relay is the stage: it passes a on and says what the client got.
func (x *exchange) relay(a answer) outcome {
	out := outcome{usages: a.usages}
	x.unnameFailedMake(a) // failedmade.go
	switch {
	case a.err != nil:
		x.fail(a.err)
	case a.held != nil && a.held.status != http.StatusOK:
		x.relayRefusal(a)
	case a.held != nil:
		x.relayHeld(a, &out)
	default:
		x.relayResponse(a.resp, &out)
	}
	return out
}

// fail answers contextd's refusal (a refusal, or a domain error) while
// the client is there.
func (x *exchange) fail(err error) {
	ctx := x.r.Context()
	if ctx.Err() != nil {
		return // the client went away
	}
	var rf *refusal
	if errors.As(err, &rf) {
		writeError(x.w, x.shape, rf.status, rf.kind, rf.msg)
		return
	}
	x.g.writeDomainError(ctx, x.w, x.shape, err)
}

// relayResponse passes the provider's response on as it comes: a JSON
// answer read whole (the gateway's call ids put in, callids.go), an SSE
// answer event by event, an error or a request forwarded unchanged as
// its bytes arrive.
func (x *exchange) relayResponse(resp *http.Response, out *outcome) {
	ctx, w := x.r.Context(), x.w
	defer resp.Body.Close()
	copyResponseHeaders(w.Header(), resp.Header)
	if resp.StatusCode != http.StatusOK || x.c.passthrough != "" {
		w.WriteHeader(resp.StatusCode)
		x.g.copyBody(ctx, w, resp.Body)
		return
	}
	if isEventStream(resp.Header.Get("Content-Type")) {
		x.relayEvents(resp, out)
		return
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil || len(body) > maxAnswerBytes {
		if ctx.Err() != nil {
			return
		}
		w.Header().Del("Content-Type")
		if x.undoable() { // nothing to record: the session is deleted with the failure (unnameFailedMake)
			w.Header().Del(HeaderSession)
		}
		writeError(w, x.shape, http.StatusBadGateway, errUpstream, "the provider's answer could not be read: "+upstreamReason(err))
		return
	}
	if rw, ok := x.d.(answerRewriter); ok {
		body = rw.clientAnswer(body, x.answerSeed())
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(resp.StatusCode)
	u, reply := x.d.answer(body)
	out.usages, out.reply = []usage{u}, reply
	x.answering(out)
	_, _ = w.Write(body)
}

// relayEvents passes an SSE answer on event by event as it arrives. A
// stream that ends without its last event (the provider or the network
// dropped it, the client went away) is passed on as it came, and no reply
// reached the client; what it carried is recorded (cutUsage).
func (x *exchange) relayEvents(resp *http.Response, out *outcome) {
	ctx, w := x.r.Context(), x.w
	rc := http.NewResponseController(w)
	w.WriteHeader(resp.StatusCode)
	_ = rc.Flush()
	st := x.newStream()
	seen, answered := false, false
	defer func() {
		if answered {
			return
		}
		if u, ok := cutUsage(st, seen); ok {
			out.usages = []usage{u}
		}
	}()
	events := newSSEReader(resp.Body)
	for {
		ev, fields, end := events.next()
		switch end {
		case sseCut:
			return
		case sseRest:
			if len(ev.raw) > 0 {
				_, _ = w.Write(ev.raw)
				_ = rc.Flush()
			}
			return
		}
		seen = seen || fields
		raw, pass, last := follow(st, ev, fields)
		if last && !answered {
			if u, reply, ok := st.result(); ok {
				out.usages, out.reply, answered = []usage{u}, reply, true
				x.answering(out)
			}
		}
		if pass {
			if _, err := w.Write(raw); err != nil {
				return
			}
			if !flushed(rc) {
				return // the client is gone or stopped reading (write deadline)
			}
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// relayHeld passes the expand loop's final round on (its JSON body, or
// its SSE events, held whole).
func (x *exchange) relayHeld(a answer, out *outcome) {
	w, rd := x.w, a.held
	setRounds(w, a.rounds)
	copyResponseHeaders(w.Header(), rd.header)
	withoutToolHeaders(w.Header())
	if !rd.sse {
		if rw, ok := x.d.(answerRewriter); ok {
			rd.body = rw.clientAnswer(rd.body, rd.seed) // as roundTrip named them
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(rd.body)))
	}
	// Whether the keepalive began the stream and the headers going out
	// are one step (commitAnswer): the ticker cannot begin it in between,
	// so an answer whose recording starts below is the one the client gets.
	if !commitAnswer(w, rd.sse) {
		// A JSON answer to a streamed request, once the stream began: it
		// cannot go out as events, and is not recorded.
		writeError(w, x.shape, http.StatusBadGateway, errUpstream, "the provider answered the streamed request without a stream")
		return
	}
	out.reply = rd.reply
	x.answering(out)
	if _, err := w.Write(rd.body); err != nil {
		return
	}
	_ = http.NewResponseController(w).Flush()
}

// relayRefusal passes the provider's error the expand loop read whole
// on: one that names the tool, or could not be read whole, is answered in
// neutral words with its status instead.
func (x *exchange) relayRefusal(a answer) {
	w, rd := x.w, a.held
	setRounds(w, a.rounds)
	if rd.unreadable || bytes.Contains(rd.body, expandName) {
		if x.r.Context().Err() == nil {
			withoutToolHeaders(w.Header())
			writeError(w, x.shape, rd.status, errUpstream, fmt.Sprintf("the provider answered %d", rd.status))
		}
		return
	}
	copyResponseHeaders(w.Header(), rd.header)
	withoutToolHeaders(w.Header())
	w.Header().Set("Content-Length", strconv.Itoa(len(rd.body)))
	w.WriteHeader(rd.status)
	_, _ = w.Write(rd.body)
}

func setRounds(w http.ResponseWriter, rounds int) {
	if rounds > 0 {
		w.Header().Set(HeaderExpandRounds, strconv.Itoa(rounds))
	}
}

// copyBody relays a body as it comes, flushing each read.
func (g *Gateway) copyBody(ctx context.Context, w http.ResponseWriter, body io.Reader) {
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if !flushed(rc) {
				return // the client is gone or stopped reading (write deadline)
			}
		}
		if err != nil || ctx.Err() != nil {
			return
		}
	}
}
