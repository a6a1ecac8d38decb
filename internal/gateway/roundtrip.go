package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/contextd/contextd/internal/chat"
)

// Round trips: every upstream call of a door's request is send's. The
// expand loop (expandloop.go) wraps roundTrip, one call read whole, as
// Bifrost's fallback loop wraps tryRequest; a request without the expand
// tool sends once (forward.go) and relay reads the answer as it comes.

// maxErrorBytes bounds a provider's error body the loop reads to check it.
const maxErrorBytes = 1 << 20

// round is one upstream answer, read whole: a JSON body, the SSE events
// to pass on, or, when status is not 200, the provider's error.
type round struct {
	status int
	header http.Header
	body   []byte
	sse    bool
	u      usage
	reply  []chat.Message
	// unreadable: the provider's error body could not be read whole
	// (over maxErrorBytes, or cut).
	unreadable bool
	// seed names a JSON answer's calls (exchange.answerSeed).
	seed string
}

// roundTrip is the stage the expand loop wraps: body sent, the answer
// read whole. A JSON body is read (at most maxAnswerBytes) and the
// door's answer taken from it; an SSE stream is followed event by event
// into a buffer of at most as much, the events the client is not to see
// (a usage chunk it did not ask for) left out; a provider's error is read
// (at most maxErrorBytes) for relay to check. err is contextd's refusal:
// the provider unreachable, or its answer unreadable (a stream that ended
// before its last event included; its rd.u is then what it carried,
// cutUsage, for the ledger).
func (x *exchange) roundTrip(body []byte) (round, error) {
	ctx := x.r.Context()
	resp, err := x.g.send(ctx, x.r, x.d, body)
	if err != nil {
		return round{}, refused(http.StatusBadGateway, errUpstream, "the provider could not be reached: "+upstreamReason(err))
	}
	defer resp.Body.Close()
	rd := round{status: resp.StatusCode, header: resp.Header}
	unreadable := func(reason string) error {
		return refused(http.StatusBadGateway, errUpstream, "the provider's answer could not be read: "+reason)
	}
	if resp.StatusCode != http.StatusOK {
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes+1))
		rd.body, rd.unreadable = b, err != nil || len(b) > maxErrorBytes
		return rd, nil
	}
	if !isEventStream(resp.Header.Get("Content-Type")) {
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
		if err != nil || len(b) > maxAnswerBytes {
			return rd, unreadable(upstreamReason(err))
		}
		// Its calls get their ids before its reply is read, so the
		// reply, the next round and the client's copy (relayHeld) name
		// them alike.
		if rw, ok := x.d.(answerRewriter); ok {
			rd.seed = x.answerSeed()
			b = rw.clientAnswer(b, rd.seed)
		}
		rd.body = b
		rd.u, rd.reply = x.d.answer(b)
		return rd, nil
	}
	rd.sse = true
	st := x.newStream()
	events := newSSEReader(resp.Body)
	var held []byte
	complete, seen := false, false
	for {
		ev, fields, end := events.next()
		if end == sseCut {
			break
		}
		if end == sseRest {
			if len(held)+len(ev.raw) <= maxAnswerBytes {
				held = append(held, ev.raw...)
			}
			break
		}
		seen = seen || fields
		raw, pass, last := follow(st, ev, fields)
		if last {
			if u, reply, ok := st.result(); ok {
				rd.u, rd.reply, complete = u, reply, true
			}
		}
		if pass {
			if len(held)+len(raw) > maxAnswerBytes {
				complete = false // an answer over 64 MiB
				break
			}
			held = append(held, raw...)
		}
		if ctx.Err() != nil {
			break
		}
	}
	if !complete {
		// Billed all the same: the caller records what it carried
		// (cutusage.go) with the loop's other calls.
		rd.u, _ = cutUsage(st, seen)
		return rd, unreadable("the stream ended before its last event")
	}
	rd.body = held
	return rd, nil
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
	g.credentials(req.Header, d.shape())
	return g.client.Do(req)
}

// upstreamReason says why the provider could not be reached, without
// echoing anything the client sent.
func upstreamReason(err error) string {
	if err == nil {
		return "answer over 64 MiB"
	}
	var ue interface{ Timeout() bool }
	if errors.As(err, &ue) && ue.Timeout() {
		return "timed out"
	}
	return "connection failed"
}
