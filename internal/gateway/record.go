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
	if len(out.usages) > 0 {
		x.answered = true // never undone (undoFailedMake), also when the gateway closing records nothing
	}
	if x.recording || len(out.usages) == 0 || x.hold == nil || !g.startRecord() {
		return
	}
	x.recording = true
	if !x.hold.claimReply() {
		out.reply = nil // its client went away first (hold.claimReply)
	}
	ctx, tenant, res, prep := x.r.Context(), x.tenant, x.res, x.prep
	h := x.hold
	h.markRecording(tenant, res)
	h.recording = true
	go func() {
		defer g.records.Done()
		defer h.release()
		defer func() {
			if p := recover(); p != nil {
				g.log.ErrorContext(ctx, "gateway recording panicked", "session", res.id, "panic", fmt.Sprint(p))
			}
		}()
		g.record(ctx, tenant, res, prep, out.usages, out.reply)
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
	if x.hold == nil || x.recording {
		return
	}
	if !x.hold.claimReply() {
		out.reply = nil // its client went away first (hold.claimReply)
	}
	x.hold.markRecording(x.tenant, x.res)
	if x.res.history == historyAside && x.sig.scope == "" { // no signal nor hint: unsignalledCompaction
		sum := store.SummaryRecord{Version: x.res.version, Seq: x.arrived.UnixNano()}
		x.g.rememberSummary(x.r.Context(), x.tenant, x.res.id, sum, out.reply) // unsignalledsummary.go
	}
	if !x.res.notStored() && len(out.reply) > 0 {
		if chain := replyStamp(x.c, out.reply); chain != "" {
			x.hold.mark(replyKey(x.tenant, chain))
		}
	}
	x.record(*out)
}

// record writes what the provider answered: its usage (as ReportUsage,
// for the view the call sent) and the assistant's reply (appended, so the
// client's next request, which carries it, matches the log), in one
// transaction (engine.RecordExchange: both or neither). It runs after the
// client hung up too; failures are logged, never answered (the answer is
// the provider's), and a reply that could not be appended is appended by
// the next request that carries it. Unlike the gateway's other writes
// (serveDoor's store.Resendable), it is durable when it returns: the
// ledger is what only contextd holds.
func (g *Gateway) record(ctx context.Context, tenant string, res resolved, prep engine.PrepareResult, us []usage, reply []chat.Message) {
	id := res.id
	ctx, cancel := detach(ctx)
	defer cancel()
	// The reply comes back with the client's next request, but the usage
	// the provider reported does not: the recording is durable.
	ctx = store.Durable(ctx)
	// The reply is appended only to the session as this call left it: when
	// another request came first, that request carried the reply itself,
	// if the client kept it.
	in := engine.ExchangeInput{LogCount: prep.Status.LogCount, Created: prep.Status.Created,
		Model: prep.Status.Usage.Model}
	if !res.notStored() {
		in.Reply = reply // a repeated request's reply is not the session's
	}
	// One report per upstream call. The calls of an expand loop after the
	// first (us[1:]) sent the view and more, and are reported first, so
	// the session's anchor is the first call's, which sent the view alone.
	for i := range us {
		u := us[(i+1)%len(us)]
		report := u.report(prep.ViewToken)
		report.Compacted = compactedCall(reply) // providercompaction.go
		if res.notStored() {
			// A repeated request sent a prefix of the view: the call goes
			// into the ledger, and calibrates as that prefix while the
			// view continues (a request of the conversation may have
			// compacted it meanwhile: a repeat's or an aside's call does
			// not hold its session, holdCall).
			n := int64(len(prep.Messages) - len(res.tail))
			report.ViewPrefix = &n
			if report.ViewToken == "" {
				report.MessageCount = &n // no token to name the view by
			}
			if len(res.tail) > 0 {
				// A summary request sent its own messages after the view's
				// prefix (summaryrequest.go): not anchored.
				report.AddedLocalTokens += max(1, approxTokens(res.tail))
			}
			// Or its own messages alone (slimmedaside.go): no count of
			// contextd's is of what was sent; nothing is calibrated.
			report.Own = res.own
		}
		if u.ok {
			in.Reports = append(in.Reports, report)
		}
	}
	if len(in.Reports) == 0 && len(in.Reply) == 0 {
		return
	}
	for i := range in.Reply {
		setMeta(&in.Reply[i], metaReply, "true")
	}
	var retry conflicts // conflictBudget bounds the tries that meet a conflict
	out, err := g.cfg.Engine.RecordExchange(ctx, tenant, id, in)
	for errors.Is(err, store.ErrVersionConflict) && retry.again(ctx) {
		out, err = g.cfg.Engine.RecordExchange(ctx, tenant, id, in)
	}
	if err != nil {
		g.log.WarnContext(ctx, "gateway exchange not recorded", "session", id, "error", err.Error())
		return
	}
	for _, d := range out.Dropped {
		g.log.WarnContext(ctx, "gateway exchange partly recorded", "session", id, "error", d)
	}
	if len(out.Reply) != len(in.Reply) || len(in.Reply) == 0 {
		return
	}
	// The digests are the reply's own (the answer carries positions).
	for i := range in.Reply {
		in.Reply[i].Position = out.Reply[i].Position
	}
	g.digests.extend(tenant, id, res.created, in.Reply)
}
