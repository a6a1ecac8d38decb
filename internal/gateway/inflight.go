package gateway

import (
	"context"
	"slices"
	"sync"
	"time"
)

// The in-flight map (Gateway.inflight) says which sessions have a call
// upstream or an answer being recorded, and which replies are being
// recorded. An exchange's entries are its hold, whose channel is closed
// when they are released: forward holds the session (its call is
// upstream; not a repeat's or an aside's, which append nothing:
// holdCall), relay marks it recording and its reply's history just
// before the answer's last byte goes out (answering), record releases
// them when the answer is recorded (or serveDoor's close, when there is
// nothing to record).
// identify reads them: busy skips a session whose call is upstream
// (unless its client went away: hold.abandoned, or the call is the
// request's twin: hold.history) and waits for one being recorded;
// awaitReply waits for a reply the request carries.

// hold is an exchange's entries in the in-flight map.
type hold struct {
	inflight *sync.Map
	pending  chan struct{}
	// gone is the client's request's end: a call whose client went away
	// keeps its session busy only while its answer is recorded (busy).
	gone <-chan struct{}
	// history is the chain of the exchange's whole history (twinHistory;
	// "" for none): a request of the same history is its twin (a client's
	// retry racing it, or the same request sent twice at once), which
	// waits for its answer to be recorded instead of going on in a
	// session of its own (busy).
	history string
	names   []string
	// recorders is the session's recording mark the exchange is in
	// (markRecording), under recordingName; nil until it records.
	recorders     *recorders
	recordingName string
	release       func()
	// recording: record took the entries over; its recording releases
	// them.
	recording bool
	// mu orders claimReply against free: once busy found the session free
	// (its client gone, no reply claimed), the exchange never records a
	// reply, and once a reply is claimed the session is never free.
	mu      sync.Mutex
	replied bool
}

// hold marks the session busy until the exchange's answer is recorded,
// or its client (ctx) went away with no answer being recorded. history is
// the chain of the exchange's whole history (hold.history).
func (g *Gateway) hold(ctx context.Context, tenant, id, history string) *hold {
	h := g.newHold(ctx, history)
	h.mark(sessionKey(tenant, id))
	return h
}

// newHold is a hold with no entries yet.
func (g *Gateway) newHold(ctx context.Context, history string) *hold {
	h := &hold{inflight: &g.inflight, pending: make(chan struct{}), gone: ctx.Done(), history: history}
	h.release = sync.OnceFunc(func() {
		for _, n := range h.names {
			h.inflight.CompareAndDelete(n, h)
		}
		if h.recorders != nil {
			h.recorders.leave(h.inflight, h.recordingName, h)
		}
		close(h.pending)
	})
	return h
}

// holdCall is the hold of an exchange whose call goes upstream in
// session res. A request that only reads its session (res.notStored: a
// repeat, or an aside) appends nothing to the log (its recording is its
// usage alone, whatever the log is then: record.go), so its call does not
// make the session busy — only its recording, which answering marks.
// Otherwise the conversation's next turn, sent with the first answer
// while its twin's repeat was still upstream, found its session busy and
// went on in a fork (TestNextTurnWhileATwinRepeats), and so did a round
// sent while the client's summary request was upstream
// (TestNextRoundWhileAnAsideIsUpstream).
func (g *Gateway) holdCall(ctx context.Context, tenant string, res resolved, c *conversation) *hold {
	if res.notStored() {
		return g.newHold(ctx, "")
	}
	return g.hold(ctx, tenant, res.id, twinHistory(res, c))
}

// mark adds name to the entries (once).
func (h *hold) mark(name string) {
	if slices.Contains(h.names, name) {
		return
	}
	h.inflight.Store(name, h)
	h.names = append(h.names, name)
}

// markRecording marks session res as being recorded by the exchange
// (recordingKey: busy waits for it), once. The mark is a set of the
// exchanges recording the session (recorders): a round and an aside of
// one session (an aside's call does not hold the session: holdCall), or
// two stored exchanges sent by session id, may be recorded at once, and
// the session is being recorded until the last of them ends. It was one
// exchange's, the later overwriting the earlier's, so the first to end
// removed the session's mark while the other still recorded
// (TestAsideRecordingLeavesARoundsMark, TestTwoRecordingsKeepTheMark).
func (h *hold) markRecording(tenant string, res resolved) {
	if h.recorders != nil {
		return
	}
	name := recordingKey(tenant, res.id)
	for {
		v, _ := h.inflight.LoadOrStore(name, &recorders{})
		r := v.(*recorders)
		r.mu.Lock()
		if !r.gone {
			r.holds = append(r.holds, h)
			r.mu.Unlock()
			h.recorders, h.recordingName = r, name
			return
		}
		r.mu.Unlock() // emptied and being deleted: store a new one
	}
}

// recorders is the value of a session's recordingKey: the exchanges
// recording an answer of the session, each until its hold is released.
// When the last leaves, the set is gone and its entry deleted (under mu:
// a recording that then finds it stores a new one).
type recorders struct {
	mu    sync.Mutex
	holds []*hold
	gone  bool
}

// leave removes h from the set, and the set from the map when it empties.
func (r *recorders) leave(inflight *sync.Map, name string, h *hold) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.holds = slices.DeleteFunc(r.holds, func(o *hold) bool { return o == h })
	if len(r.holds) == 0 && !r.gone {
		r.gone = true
		inflight.CompareAndDelete(name, r)
	}
}

// one is an exchange still recording the session, nil when none is.
func (r *recorders) one() *hold {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.holds) == 0 {
		return nil
	}
	return r.holds[0]
}

// waitRecorded waits until no exchange records the session, until, or
// ctx's end.
func (g *Gateway) waitRecorded(ctx context.Context, tenant, id string, until time.Time) {
	v, ok := g.inflight.Load(recordingKey(tenant, id))
	if !ok {
		return
	}
	r := v.(*recorders)
	for h := r.one(); h != nil; h = r.one() {
		if !waitHold(ctx, h, until) {
			return
		}
	}
}

// abandoned reports whether the exchange's client went away.
func (h *hold) abandoned() bool {
	select {
	case <-h.gone:
		return true
	default:
		return false
	}
}

// free reports whether the session may go to another request: the
// exchange's client went away and its reply was not claimed (claimReply),
// so the exchange appends nothing more to the session.
func (h *hold) free() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.replied && h.abandoned()
}

// claimReply says whether the exchange may record its reply: yes once
// claimed; not when its client went away before the claim (the client
// never had the answer whole, and free may have let its retry, or another
// request of the same history, into the session, whose own reply is the
// one the client will carry). Its usage is recorded either way.
func (h *hold) claimReply() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.replied && !h.abandoned() {
		h.replied = true
	}
	return h.replied
}

// releaseUnlessRecording releases the entries unless a recording holds
// them (also when relaying panicked).
func (h *hold) releaseUnlessRecording() {
	if !h.recording {
		h.release()
	}
}

// wholeHistory is the chain of c's whole history (its last message's),
// "" when it has none.
func wholeHistory(c *conversation) string {
	if n := len(c.chains); n > 0 && n == len(c.msgs) {
		return c.chains[n-1]
	}
	return ""
}

// twinHistory names the exchange's twins (hold.history): its whole
// history, when it went on in a session it did not make. A request that
// made its session is not waited for: identical first requests at once
// cannot be told from strangers that start alike, and each goes on in a
// session of its own (TestConcurrentIdenticalRequests).
func twinHistory(res resolved, c *conversation) string {
	if res.made {
		return ""
	}
	return wholeHistory(c)
}

// waitHold waits until h is released (true), until, or ctx's end.
func waitHold(ctx context.Context, h *hold, until time.Time) bool {
	t := time.NewTimer(max(0, time.Until(until)))
	defer t.Stop()
	select {
	case <-h.pending:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// sessionKey names, in the in-flight map, a session whose call is out.
func sessionKey(tenant, id string) string {
	return tenant + "\x00" + id
}

// recordingKey names, in the in-flight map, a session whose answer is
// being recorded.
func recordingKey(tenant, id string) string {
	return "recording\x00" + tenant + "\x00" + id
}

// replyKey names, in the in-flight map, a reply being recorded by the
// history chain it ends.
func replyKey(tenant, chain string) string {
	return "reply\x00" + tenant + "\x00" + chain
}
