package gateway

import (
	"context"
	"errors"
	"fmt"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

// Record: the last stage of a door's request (exchange.go). What relay
// says the client got goes into the session without holding the client:
// every upstream call the provider answered into the ledger, the reply
// the client got whole into the log. Until it is recorded the session
// stays busy (inflight.go): no stranger's request lands in it, and a
// request carrying the reply waits for it. An answer that goes out whole
// starts its recording from just before its last byte (answering): the
// recording never waits for the client to read it, so a slow reader never
// holds the requests that wait for its session.

// record is the stage: it starts the recording of out (g.record) and
// hands it the session's in-flight entry, released when the recording
// ends. Nothing to record (no call answered), a recording relay already
// started (answering), or the gateway closing (Wait), leaves the entry to
// serveDoor's close or to that recording.
func (x *exchange) record(out outcome) {
	g := x.g
	if x.recording || len(out.usages) == 0 || x.hold == nil || !g.startRecord() {
		return
	}
	x.recording = true
	ctx, tenant, res, prep, key := x.r.Context(), x.tenant, x.res, x.prep, x.key
	h := x.hold
	h.mark(recordingKey(tenant, res.id))
	h.recording = true
	go func() {
		defer g.records.Done()
		defer h.release()
		defer func() {
			if p := recover(); p != nil {
				g.log.ErrorContext(ctx, "gateway recording panicked", "session", res.id, "panic", fmt.Sprint(p))
			}
		}()
		g.record(ctx, tenant, res, prep, key, out.usages, out.reply)
	}()
}

// answering is relay's word, just before the last byte of an answer that
// goes out whole: the answer is recorded from now (record), while the
// last byte is written. A request that checks the session waits for the
// recording (busy), and the client's next request, which carries the
// reply and may come as soon as it has the last byte, waits for it
// (awaitReply), so it finds the reply in the log. The reply is stamped
// with its place in the history. Once a recording started, a later word
// (a stream with a second last event) changes nothing.
func (x *exchange) answering(out *outcome) {
	out.answered = true
	if x.hold == nil || x.recording {
		return
	}
	x.hold.mark(recordingKey(x.tenant, x.res.id))
	if x.res.repeat == 0 && len(out.reply) > 0 {
		if chain := replyStamp(x.c, out.reply); chain != "" {
			x.hold.mark(replyKey(x.tenant, chain))
		}
	}
	x.record(*out)
}

// record writes what the provider answered: its usage (as ReportUsage,
// for the view the call sent) and the assistant's reply (appended, so the
// client's next request, which carries it, matches the log). It runs
// after the client hung up too; failures are logged, never answered (the
// answer is the provider's), and a reply that could not be appended is
// appended by the next request that carries it.
func (g *Gateway) record(ctx context.Context, tenant string, res resolved, prep engine.PrepareResult, key string, us []usage, reply []chat.Message) {
	id := res.id
	ctx, cancel := detach(ctx)
	defer cancel()
	// The reply is appended only to the session as this call left it
	// (and as the report moves it): when another request came first, that
	// request carried the reply itself, if the client kept it.
	expect := prep.Status.Version
	if res.repeat > 0 {
		reply = nil // a repeated request's reply is not the session's
	}
	// One report per upstream call. The calls of an expand loop after the
	// first (us[1:]) sent the view and more, and are reported first, so
	// the session's anchor is the first call's, which sent the view alone.
	for i := range us {
		u := us[(i+1)%len(us)]
		report := u.report(prep.ViewToken)
		if res.repeat > 0 {
			// A repeated request sent a prefix of the view: the call goes
			// into the ledger, nothing else.
			n := int64(len(prep.Messages))
			report.ViewToken, report.MessageCount = "", &n
		}
		if !u.ok {
			continue
		}
		if _, err := g.cfg.Engine.ReportUsage(ctx, tenant, id, report); err != nil {
			g.log.WarnContext(ctx, "gateway usage not recorded", "session", id, "error", err.Error())
		} else {
			expect++
		}
	}
	if len(reply) == 0 {
		return
	}
	for i := range reply {
		setMeta(&reply[i], metaReply, "true")
	}
	out, err := g.appendReply(ctx, tenant, res, prep, key, expect, reply)
	if err != nil {
		g.log.WarnContext(ctx, "gateway reply not recorded", "session", id, "error", err.Error())
		return
	}
	if len(out.Messages) != len(reply) {
		return
	}
	// The digests are the reply's own (the answer carries positions).
	for i := range reply {
		reply[i].Position = out.Messages[i].Position
	}
	g.digests.extend(tenant, id, res.created, reply)
}

// appendReply appends the reply to the session as the call left it. The
// session's version may have moved without its log growing: the report of
// the previous call, relayed by another replica, committed after this
// call's prepare. Then the reply still follows the last message the call
// sent and is appended at the new version. When the log grew (another
// request appended, usually carrying this reply itself) or the session was
// made again, the reply is not appended: the next request that carries it
// appends it.
func (g *Gateway) appendReply(ctx context.Context, tenant string, res resolved, prep engine.PrepareResult, key string, expect int64, reply []chat.Message) (engine.AppendResult, error) {
	var retry conflicts // conflictBudget bounds the appends that meet a log that has not grown
	for {
		out, err := g.cfg.Engine.AppendMessages(ctx, tenant, res.id, engine.AppendInput{Messages: reply, IdempotencyKey: "gwr-" + key, ExpectedVersion: &expect})
		if !errors.Is(err, store.ErrVersionConflict) || !retry.again(ctx) {
			return out, err
		}
		st, serr := g.cfg.Engine.SessionStatus(ctx, tenant, res.id)
		if serr != nil {
			return out, err
		}
		if st.LogCount != prep.Status.LogCount || !st.Created.Equal(prep.Status.Created) {
			return out, err
		}
		expect = st.Version
	}
}
