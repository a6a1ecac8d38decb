package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/tokens"
	"github.com/contextd/contextd/internal/watch"
)

// ExchangeInput is what a model call relayed by the gateway leaves to
// record once its answer went out: the provider's usage of each upstream
// call and the assistant's reply.
type ExchangeInput struct {
	// Reports are recorded in order, each as ReportUsage records it.
	Reports []ReportInput
	// Reply is appended when the session's log is still where the call
	// left it (LogCount messages, the incarnation Created): otherwise a
	// request that came first carried the reply itself, or the session was
	// made again, and the reply is not the session's to append.
	Reply    []chat.Message
	LogCount int64
	Created  time.Time
	// Model is the model the reply is counted for outside the transaction
	// (the session's as the call saw it); a session whose model changed
	// meanwhile has it counted again.
	Model string
}

// ExchangeResult is what RecordExchange stored.
type ExchangeResult struct {
	Version int64
	// Reply is the reply as stored (ids, positions); nil when it was not
	// appended.
	Reply    []chat.Message
	Warnings []string
	// Dropped says why each report, or the reply, was left out: a report
	// the ledger cannot take (no input tokens, figures past the bounds) is
	// not recorded and does not keep the rest of the exchange from being
	// recorded; nor does a reply the log cannot take.
	Dropped []string
}

// RecordExchange records a relayed model call in one transaction: its
// usage reports (ledger, calibration, anchor) and the reply appended, both
// or neither — but a reply the log refuses is left out (Dropped) rather
// than taking the bill with it. The gateway calls it once per answered request, so the
// recording costs one commit however many upstream calls the answer took.
// A reply is never stored twice: once appended, the log is no longer where
// the call left it.
func (e *Engine) RecordExchange(ctx context.Context, tenant, id string, in ExchangeInput) (ExchangeResult, error) {
	// A report that could never be recorded (a provider's usage block
	// with no input, or figures past the bounds) is left out and said so
	// (Dropped): it must not keep the reply and the other calls' reports
	// from being recorded, as it did not when each was its own call.
	var invalid []string
	valid := in.Reports[:0:0]
	for i, r := range in.Reports {
		r = e.relayedOutput(ctx, in.Model, r)
		if err := checkReported(r); err != nil {
			invalid = append(invalid, fmt.Sprintf("usage report %d not recorded: %v", i, err))
			continue
		}
		valid = append(valid, r)
	}
	in.Reports = valid
	if len(in.Reports) == 0 && len(in.Reply) == 0 {
		return ExchangeResult{Dropped: invalid}, nil
	}
	// Likewise a reply the log cannot take (past the caps, invalid, or
	// refused when appended: a quota, the view's message cap) must not
	// keep the bill from being recorded: the reports are the provider's
	// figures, which only contextd holds; the client resends the reply
	// with its next request.
	var counted []chat.Message
	if len(in.Reply) > 0 {
		err := chat.CheckAppend("reply", in.Reply)
		if err == nil {
			err = chat.ValidateMessages("reply", in.Reply)
		}
		if err == nil {
			counted, err = e.countMessages(ctx, in.Model, in.Reply)
		}
		if err != nil {
			if len(in.Reports) == 0 {
				return ExchangeResult{}, err
			}
			invalid = append(invalid, fmt.Sprintf("reply not appended: %v", err))
			in.Reply, counted = nil, nil
		}
	}
	res, err := e.recordExchangeRepairing(ctx, tenant, id, in, counted)
	if err != nil && len(counted) > 0 && len(in.Reports) > 0 && ctx.Err() == nil &&
		!errors.Is(err, store.ErrVersionConflict) && !errors.Is(err, store.ErrNotFound) {
		invalid = append(invalid, fmt.Sprintf("reply not appended: %v", err))
		in.Reply = nil
		res, err = e.recordExchangeRepairing(ctx, tenant, id, in, nil)
	}
	if err != nil {
		return ExchangeResult{}, err
	}
	res.Dropped = invalid
	return res, nil
}

// recordExchangeRepairing is one recording, repairing a log an
// interrupted call left open once if it must.
func (e *Engine) recordExchangeRepairing(ctx context.Context, tenant, id string, in ExchangeInput, counted []chat.Message) (ExchangeResult, error) {
	for attempt := 1; ; attempt++ {
		res, err := e.recordExchangeOnce(ctx, tenant, id, in, counted)
		if !errors.Is(err, errRepair) || attempt == 2 {
			return res, err
		}
		if err := e.repairInterrupted(ctx, tenant, id); err != nil {
			return ExchangeResult{}, err
		}
	}
}

func (e *Engine) recordExchangeOnce(ctx context.Context, tenant, id string, in ExchangeInput, counted []chat.Message) (ExchangeResult, error) {
	var out ExchangeResult
	var reports []reported
	var before, final store.Session
	sent := false // announced with the commit
	// Pipelined: every write's error is returned as it is, and nothing
	// goes on after one (store.Pipelined). The open tool calls, which the
	// reply's append pairs with, are read with the lock — or both are
	// the ones this replica's PrepareContext committed, checked by the
	// server with the writes, in one round trip (store.ReadAhead.Held): the
	// recording is on the path of the session's next request.
	txCtx := store.WithReadAhead(store.Pipelined(ctx), store.ReadAhead{OpenToolCalls: len(counted) > 0, Held: true})
	err := e.store.InTx(txCtx, func(ctx context.Context, tx store.Tx) error {
		out, reports, sent = ExchangeResult{}, nil, false
		s, err := lockedSession(ctx, tx, tenant, id)
		if err != nil {
			return err
		}
		before = s // the view cache's entry is of this version
		for _, r := range in.Reports {
			rep, err := e.reportInTx(ctx, tx, &s, r)
			if err != nil {
				return err
			}
			if rep.replayed {
				// Recorded before, under its idempotency key: nothing
				// to write, nothing to announce.
				out.Warnings = append(out.Warnings, "a usage report was recorded before under its idempotency key: not recorded again")
				continue
			}
			if rep.skipped != "" {
				out.Warnings = append(out.Warnings, rep.skipped)
			}
			reports = append(reports, rep)
		}
		if len(counted) > 0 && s.LogCount == in.LogCount && s.CreatedAt.Equal(in.Created) {
			msgs := counted
			if s.Model != in.Model {
				if msgs, err = e.countMessages(ctx, s.Model, in.Reply); err != nil {
					return err
				}
			}
			if out.Reply, err = e.appendInTx(ctx, tx, &s, msgs); err != nil {
				return err
			}
		}
		out.Version = s.Version
		final = s
		if len(reports) == 0 && out.Reply == nil {
			return nil
		}
		if err := tx.UpdateSession(ctx, &s); err != nil {
			return err
		}
		sent, err = e.announceTx(ctx, tx, tenant, id, s.Version, exchangeEvent(out))
		return err
	})
	if err != nil {
		return ExchangeResult{}, err
	}
	for _, rep := range reports {
		e.reportedAfterCommit(ctx, tenant, id, rep)
	}
	if out.Reply != nil {
		e.views.appended(&before, &final, out.Reply)
	}
	if !sent && (out.Reply != nil || len(reports) > 0) {
		e.notify(ctx, tenant, id, final.Version, exchangeEvent(out))
	}
	return out, nil
}

// exchangeEvent is what watchers are told of a recorded exchange.
func exchangeEvent(out ExchangeResult) watch.Event {
	if out.Reply != nil {
		return watch.EventAppended
	}
	return watch.EventUpdated
}

// relayedOutput counts an estimated report's relayed text with the
// encoding of the session's model, outside the transaction: the output is
// at least that. It is tokenized as any text is, within the count limits
// (admitCount): at most MaxCountBytes of it, with its share of the
// server-wide budget; the rest, all of it when the budget is refused or
// the encoding cannot be had, counts a token per 4 bytes, and the report
// is recorded all the same.
func (e *Engine) relayedOutput(ctx context.Context, model string, r ReportInput) ReportInput {
	if !r.Estimated || r.RelayedText == "" {
		return r
	}
	text := r.RelayedText
	if limit := e.limits.MaxCountBytes; limit > 0 && len(text) > limit {
		text = text[:limit]
	}
	n := int64(len(r.RelayedText)+3) / 4
	if m, _, enc, err := e.modelFor(model); err == nil {
		if release, err := e.admitCount(ctx, tokens.FramingOf(m), text, "", nil, nil); err == nil {
			counted := int64(enc.Count(text))
			release()
			e.metrics.TokensCounted(enc.Name(), counted)
			n = counted + int64(len(r.RelayedText)-len(text)+3)/4
		}
	}
	r.OutputTokens, r.RelayedText = max(r.OutputTokens, n), ""
	return r
}
