package gateway

import (
	"net/http"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

// The request path of a door (/v1/chat/completions, /v1/responses,
// /v1/messages) is six stages over one request value, the exchange, each
// stage one file with one entry function, called in order by serveDoor
// (as net/http/httputil.ReverseProxy.ServeHTTP reads top to bottom):
//
//	admit     admit.go      who calls (contextd's key, the tenant's rate limit), the body, the door's parse
//	identify  identify.go   what the client says of its conversation: its signal, its history chains
//	prepare   prepare.go    the session (matched and appended, under the conflict loop) and PrepareContext's view, built into the upstream body
//	forward   forward.go    the upstream call: one send, or the expand loop's round trips (expandloop.go, roundtrip.go)
//	relay     relay.go      the answer (or contextd's refusal of it) to the client, and what the client got: the outcome
//	record    record.go     the outcome into the session: usage into the ledger, the reply into the log, without holding the client
//
// A stage that refuses the request answers the client itself and says so
// (false); the stages after it do not run. A loop wraps one stage: the
// conflict loop in prepare wraps identify's match, the expand loop wraps
// roundTrip (as Bifrost's fallback loop wraps tryRequest).

// exchange is one request through a door, as the stages fill it in.
type exchange struct {
	g *Gateway
	w http.ResponseWriter // the client's writer (the keepalive's while the expand loop holds a stream)
	r *http.Request
	d door
	// shape is the door's error shape.
	shape wireShape
	// arrived is when the request's body was in (its work begins): it
	// sets the one deadline of all its waits for replies and twins
	// (waitsUntil), and orders the session's summary records
	// (rememberSummary).
	arrived time.Time

	// admit: the caller's tenant, the request's body as sent (checked and
	// split once: decode.go) and its members, and its conversation as the
	// door parsed it.
	tenant string
	rb     *requestBody
	c      *conversation

	// identify: what the client says of the conversation's identity.
	sig signal

	// prepare: the session the request landed in, PrepareContext's
	// answer, the request's key (requestKey: it seeds the ids of its
	// answer's calls); the client's own tools (the
	// expand loop restores them), whether the expand loop runs and whether
	// its tool is offered, and the body to send.
	res       resolved
	prep      engine.PrepareResult
	key       string
	client    clientTools
	expanding bool
	toolOn    bool
	body      []byte

	// forward: the session's entry in the in-flight map (record.go), and
	// the end of the keepalive the expand loop started (keepalive.go).
	hold          *hold
	stopKeepalive func()
	// answers counts the upstream answers read (answerSeed).
	answers int

	// record: the recording started (from relay's answering, or the
	// stage itself), once. answered: the provider answered a call of the
	// exchange (usage to record), whether or not its recording started.
	recording, answered bool
}

// answer is what forward has for relay: the provider's response, its body
// not yet read (passed on as it comes), or a round the expand loop read
// whole (its final answer, or the provider's error), or contextd's own
// refusal (err). usages are the upstream calls already read.
type answer struct {
	resp   *http.Response
	held   *round
	err    error
	usages []usage
	rounds int // contextd_expand rounds answered before held
}

// outcome is what relay says the client got, for record: usages are the
// upstream calls the provider answered (each goes into the ledger); reply,
// set when the answer went out whole (its last byte was written, or was
// being written when the client stopped reading), is the assistant's reply
// in it, which goes into the log.
type outcome struct {
	usages []usage
	reply  []chat.Message
}

// serveDoor is a door's request: the stages in order.
func (g *Gateway) serveDoor(w http.ResponseWriter, r *http.Request, d door) {
	// What the gateway stores of the conversation, its client sends again
	// with its next call: those writes need not wait for the disk
	// (store.Resendable). The ledger, which no client resends, is written
	// durably (record.go, the summarizer's overhead: store.Durable).
	r = r.WithContext(store.Resendable(r.Context()))
	x := &exchange{g: g, w: w, r: r, d: d, shape: d.shape()}
	defer x.close()
	if !x.admit() || !x.identify() || !x.prepare() {
		return
	}
	x.record(x.relay(x.forward()))
}

// close ends what the exchange still holds when serveDoor returns (also
// when a stage panicked): the keepalive, the session it made if its call
// failed with nothing to record (undoFailedMake), and the session's
// in-flight entry unless record took it over.
func (x *exchange) close() {
	if x.stopKeepalive != nil {
		x.stopKeepalive()
	}
	if x.hold != nil {
		// Released even if the undo panics (the server recovers a
		// handler's panic; an entry left in flight would keep every
		// later request off the session).
		defer x.hold.releaseUnlessRecording()
	}
	x.undoFailedMake() // failedmade.go
}
