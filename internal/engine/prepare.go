package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/watch"
)

// PrepareInput is a PrepareContext request.
type PrepareInput struct {
	Messages        []chat.Message
	IdempotencyKey  string
	ExpectedVersion *int64
	// ViewToken is the ViewToken of an earlier result the caller holds the
	// messages of; when the view has only grown since, the result carries
	// only the messages after it (Delta).
	ViewToken string
	// NoLedger: the caller does not read Status.Ledger (the gateway), so
	// it is not read (a read, on PostgreSQL a round trip, less).
	NoLedger bool
	// Read, when set, is the session's row as the caller has just read it
	// (the gateway's match, SessionRow): the call starts from it instead
	// of reading the row again (a read, on PostgreSQL a round trip, less).
	// It is as safe as a row read here: the transaction locks the session
	// and takes the cached view only at the version and incarnation
	// (creation time, model, view epoch) it locks, so a row another write
	// has overtaken, or one of a session deleted and created again under
	// its id, costs a read of the view, never a stale one
	// (TestPrepareFromARowOfAReplacedSession). Only the first attempt uses
	// it.
	Read *store.Session
	// Shared, for the appends of a fork's history, names the session it
	// forked from and how much of that log it shares: what the two logs
	// hold alike at the same positions is stored once (store.ForkTx,
	// docs/storage.md).
	Shared store.SharedPrefix
	// Edits are client edits recorded in the call's own transaction,
	// before the append, in order, each on the view the one before leaves
	// (prepareedits.go): planned on the session at ExpectedVersion (which
	// they require), so a call that fails records none of them.
	Edits []ViewEdit
	// NoHeads are history chains no session may hold as its head (the
	// request's new chains, which a longer session would hold): checked
	// with the first transaction's lock (store.ReadAhead.NoHeads), the
	// call then fails with store.ErrLongerSession, changing nothing.
	NoHeads []string
}

// PrepareResult is what to send to the model, and the status.
type PrepareResult struct {
	// Messages is the active view, or with Delta only its messages after
	// the view of the request's ViewToken.
	Messages  []chat.Message
	Delta     bool
	ViewToken string
	Status    Status
	// Cache are the prompt-cache hints (see cachehints.go); their indices
	// are into the whole view, also with Delta.
	Cache CacheHints
	// Tools are the tool definitions contextd adds to the session's own,
	// to send to the model after them (the contextd_expand tool when the
	// policy exposes it: expandtool.go).
	Tools []chat.Tool
	// view is the whole active view (Messages may be only its tail).
	view []chat.Message
}

// prepared is what the first transaction of PrepareContext found: the
// session and view as the append would leave them, and whether to compact.
type prepared struct {
	before   store.Session // the session as read, locked
	after    store.Session // as the append leaves it
	view     []chat.Message
	input    []chat.Message // the messages to append, counted (nil for a replay)
	appended []chat.Message // as stored
	usage    Usage
	compact  []compaction.Tier // nil: no compaction
	replayed bool
	at       time.Time // when the append is stored
	status   Status
	// cals is the calibration read before the transactions, so the answer
	// after a commit reads nothing that could fail it.
	cals map[string]*store.Calibration
	// summaryAhead: the next compaction will summarize (background.go);
	// hasJob: the call waits for the session's job (it exists).
	summaryAhead, hasJob bool
	// hints were computed and recorded in the transaction that wrote the
	// view (nil when none did: the answer computes them).
	hints *preparedHints
	// noLedger: the answer goes without the ledger (PrepareInput.NoLedger).
	noLedger bool
	// edits are the client edits planned (PrepareInput.Edits) on the
	// session as edBase was, which the transactions write first.
	edits  []*editPlan
	edBase store.Session
}

// PrepareContext is the one call an agent makes before each model call:
// append the new messages, compact if the policy says so, and return the
// active view to send with the status.
//
// It is atomic: it either appends and returns a view that fits, or changes
// nothing, so a failed call can be retried as is. The append is checked
// and the would-be view measured in a transaction that commits only when
// no compaction is needed. Otherwise the compaction of the would-be view
// is planned outside any transaction (an LLM summary may take seconds),
// and the append and the compaction are written together in one
// transaction, only if the session has not moved meanwhile (else it starts
// over, at most three times, then ABORTED).
func (e *Engine) PrepareContext(ctx context.Context, tenant, id string, in PrepareInput) (PrepareResult, error) {
	var hash string
	if len(in.Messages) > 0 {
		if err := chat.CheckAppend("messages", in.Messages); err != nil {
			return PrepareResult{}, err
		}
		if err := chat.ValidateMessages("messages", in.Messages); err != nil {
			return PrepareResult{}, err
		}
		var err error
		if hash, err = requestHash(AppendInput{Messages: in.Messages, ExpectedVersion: in.ExpectedVersion}); err != nil {
			return PrepareResult{}, err
		}
	}
	var since *viewToken
	if in.ViewToken != "" {
		t, err := parseViewToken("view_token", in.ViewToken, id)
		if err != nil {
			return PrepareResult{}, err
		}
		since = &t
	}
	noHeads, err := e.noHeads(ctx, tenant, in.NoHeads)
	if err != nil {
		return PrepareResult{}, err
	}
	in.NoHeads = noHeads
	for attempt := 1; ; attempt++ {
		res, err := e.prepareOnce(ctx, tenant, id, in, hash, since)
		in.Read = nil // a second attempt reads the row again
		if errors.Is(err, errStale) && attempt < 3 {
			continue
		}
		if errors.Is(err, errStale) {
			return PrepareResult{}, fmt.Errorf("session %q kept changing while its compaction was planned; nothing was changed, try again: %w", id, store.ErrVersionConflict)
		}
		return res, err
	}
}

// errDecided rolls back the first transaction of PrepareContext once it
// knows a compaction is needed.
var errDecided = errors.New("compaction needed")

func (e *Engine) prepareOnce(ctx context.Context, tenant, id string, in PrepareInput, hash string, since *viewToken) (PrepareResult, error) {
	cur, err := e.startingRow(ctx, tenant, id, in.Read)
	if err != nil {
		return PrepareResult{}, err
	}
	// The view as of a version (from the cache when it has it); the
	// transaction reads it again only if the session moved since.
	cached, _, read, err := e.viewOf(ctx, cur)
	moved := errors.Is(err, store.ErrVersionConflict) // cached nil: also an empty view
	switch {
	case moved:
		cached = nil // the transaction reads the view
	case err != nil:
		return PrepareResult{}, err
	default:
		cur = read
	}
	m, _ := e.models.Lookup(cur.Model)
	cal, err := e.calibration(ctx, tenant, m)
	if err != nil {
		return PrepareResult{}, err
	}
	cals := map[string]*store.Calibration{m.Name: cal}
	counted, err := e.countMessages(ctx, cur.Model, in.Messages)
	if err != nil {
		return PrepareResult{}, err
	}
	edits, edited, err := e.planPrepareEdits(ctx, id, cur, cached, moved, in)
	if err != nil {
		return PrepareResult{}, err
	}
	var pr prepared
	sent := false // the append's announcement went with its commit
	// Pipelined: every write's error is returned as it is, and nothing
	// goes on after one (store.Pipelined). The open tool calls (the
	// append's pairing) and the hints row are read with the lock — or are
	// the ones this replica's recording of the last answer committed,
	// checked by the server with the writes (store.ReadAhead.Held).
	txCtx := store.WithReadAhead(store.Pipelined(ctx), store.ReadAhead{OpenToolCalls: true, PreparedView: true, Held: true, NoHeads: in.NoHeads})
	err = e.store.InTx(txCtx, func(ctx context.Context, tx store.Tx) error {
		pr, sent = prepared{cals: cals, noLedger: in.NoLedger, edits: edits, edBase: cur}, false
		s, err := lockedSession(ctx, tx, tenant, id) // locks the session
		if err != nil {
			return err
		}
		base := s.Version // the version the append expects, before the edits
		if err := e.writeEdits(ctx, tx, &s, &pr, store.ErrVersionConflict); err != nil {
			return err
		}
		pr.before = s
		msgs := counted
		if len(msgs) > 0 && in.IdempotencyKey != "" {
			rec, err := tx.GetIdempotency(ctx, tenant, id, in.IdempotencyKey)
			switch {
			case err == nil && rec.RequestHash == hash:
				pr.replayed, msgs = true, nil // appended before: prepare what is there
			case err == nil:
				return fmt.Errorf("idempotency key %q was used for a different request: %w", in.IdempotencyKey, ErrFailedPrecondition)
			case !errors.Is(err, store.ErrNotFound):
				return err
			}
		}
		if len(msgs) > 0 && in.ExpectedVersion != nil && *in.ExpectedVersion != base {
			return fmt.Errorf("session %q is at version %d, not the expected %d: %w", id, base, *in.ExpectedVersion, store.ErrVersionConflict)
		}
		if len(msgs) > 0 && s.Model != cur.Model {
			if msgs, err = e.countMessages(ctx, s.Model, in.Messages); err != nil {
				return err
			}
		}
		pr.input, pr.at = msgs, e.timestamp()
		staged, err := e.stageAppend(ctx, tx, &s, msgs, pr.at, true, restartsHistory(in))
		if err != nil {
			return err
		}
		staged.shared = in.Shared
		// The cached view only at the version and incarnation it locks: a
		// version alone is no identity (the row may be one read before a
		// delete and a create of the same id, PrepareInput.Read).
		if len(edits) > 0 {
			pr.view = edited[:len(edited):len(edited)] // the edits' view, of the version they were planned on
		} else if cached != nil && sameWrite(&s, &cur) && stampOf(&s) == stampOf(&cur) && int64(len(cached)) == s.ActiveCount {
			pr.view = cached[:len(cached):len(cached)] // shared: appending copies
		} else if pr.view, err = tx.ViewMessages(ctx, tenant, id); err != nil {
			return err
		}
		if needsRepair(pr.view) && len(danglingCalls(pr.view)) > 0 {
			return errRepair
		}
		pr.appended = staged.msgs
		pr.view = append(pr.view, staged.msgs...)
		staged.apply(&s)
		pr.after = s
		v, err := e.viewCached(ctx, s, cals)
		if err != nil {
			return err
		}
		pr.usage = v.Usage
		if err := pr.decide(e); err != nil {
			return err
		}
		if pr.compact != nil {
			return errDecided
		}
		if err := e.checkAnswerSize(&pr.after, pr.view, since); err != nil {
			return err
		}
		// The cache-hints row of the view this call answers, in this
		// transaction: one commit per call, not two.
		token := tokenOf(&pr.after, []int64{lastViewOrd(&pr.after)}).String()
		h, row, err := e.hintsInTx(ctx, tx, &pr.after, true, pr.view, token, -1, nil)
		if err != nil {
			return err
		}
		pr.hints = &preparedHints{hints: h, version: pr.after.Version, token: token, before: row}
		if len(staged.msgs) == 0 {
			if len(edits) > 0 {
				return tx.UpdateSession(ctx, &pr.before)
			}
			return nil
		}
		s = pr.before
		if err := staged.write(ctx, tx, &s); err != nil {
			return err
		}
		if err := tx.UpdateSession(ctx, &s); err != nil {
			return err
		}
		if sent, err = e.announceTx(ctx, tx, tenant, id, s.Version, watch.EventAppended); err != nil {
			return err
		}
		return e.rememberAppend(ctx, tx, tenant, id, in.IdempotencyKey, hash, staged.msgs, s.Version)
	})
	if errors.Is(err, errRepair) {
		if err := e.repairInterrupted(ctx, tenant, id); err != nil {
			return PrepareResult{}, err
		}
		return PrepareResult{}, errStale // start over on the repaired view
	}
	if err != nil && !errors.Is(err, errDecided) {
		return PrepareResult{}, err
	}
	if pr.compact == nil {
		if len(edits) > 0 {
			e.editsWritten(ctx, &pr.after, pr.view)
			e.notify(ctx, tenant, id, pr.after.Version, watch.EventCompacted)
		}
		if len(pr.appended) > 0 {
			if len(edits) == 0 {
				e.views.appended(&pr.before, &pr.after, pr.appended)
			}
			if !sent {
				e.notify(ctx, tenant, id, pr.after.Version, watch.EventAppended)
			}
		}
		return e.answerPrepare(ctx, tenant, id, pr, since)
	}
	return e.prepareWithCompaction(ctx, tenant, id, in, hash, pr, since)
}

// decide sets what PrepareContext does with the would-be session: fail
// (auto_compact off and over the window), compact (with which tiers), or
// just warn.
func (pr *prepared) decide(e *Engine) error {
	s, u := pr.after, pr.usage
	pr.status = Status{SessionID: s.ID, Version: s.Version, Usage: u, Time: e.now().UTC(), LogCount: s.LogCount, Created: s.CreatedAt}
	paused := pausedNow(&s)
	switch {
	case !u.Policy.AutoCompact:
		if u.Over > 0 {
			return fmt.Errorf("auto_compact is off and the request is %d tokens over the usable window (%d of %d); nothing was appended: compact, revert, or start a new session from a hand-off: %w: %w",
				u.Over, u.Used, u.ContextWindow-u.ReservedOutput, ErrOverWindow, ErrFailedPrecondition)
		}
		if u.Level >= compaction.LevelCompact {
			pr.status.Warnings = append(pr.status.Warnings, "auto_compact is off: "+u.Recommendation)
		}
	case u.Level >= compaction.LevelCompact && (!paused || u.Over > 0):
		pr.compact = []compaction.Tier{compaction.TierPrune, compaction.TierDropMiddle}
		if u.Level >= compaction.LevelSummarize {
			pr.compact = compaction.AllTiers
		}
	case paused && u.Level >= compaction.LevelCompact:
		pr.status.Warnings = append(pr.status.Warnings, pausedWarning(&s))
	}
	return nil
}

// prepareWithCompaction plans the compaction of the would-be view, then
// writes the append and the compaction (or, when there is nothing to
// compact, the append and a pause of auto-compaction) in one transaction,
// if the session is still where the plan started.
func (e *Engine) prepareWithCompaction(ctx context.Context, tenant, id string, in PrepareInput, hash string, pr prepared, since *viewToken) (PrepareResult, error) {
	cin := cacheAware(CompactInput{tiers: pr.compact}, pr.usage)
	snap := snapshot{session: pr.after, view: pr.view}
	c, err := e.chooseCompaction(ctx, snap, cin, pr.usage)
	if err != nil {
		return PrepareResult{}, err
	}
	p, deferred := c.p, c.deferred
	pr.status.Warnings = append(pr.status.Warnings, c.warnings...)
	pr.summaryAhead, pr.hasJob = c.summaryAhead, c.waiting
	waitNote := func(ws []string) []string {
		if c.waiting {
			return ws // said in c.warnings
		}
		return append(ws, deferredWarning(pr.usage))
	}
	if deferred && len(pr.input) == 0 && c.stale == "" && len(pr.edits) == 0 {
		// Nothing to append and nothing to compact: no write at all.
		pr.status.Warnings = append(pr.status.Warnings, p.result.Warnings...)
		pr.status.Warnings = waitNote(pr.status.Warnings)
		return e.answerPrepare(ctx, tenant, id, pr, since)
	}
	var res CompactResult
	var final store.Session
	paused := false
	jobDiscarded := false
	err = e.store.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		if err := tx.LockCompaction(ctx, tenant, id); err != nil {
			return err
		}
		s, err := lockedSession(ctx, tx, tenant, id)
		if err != nil {
			return err
		}
		if err := e.writeEdits(ctx, tx, &s, &pr, errStale); err != nil {
			return err
		}
		if s.Version != pr.before.Version && !unchangedButVersion(pr.before, s) {
			return errStale
		}
		if jobDiscarded, err = e.settleJob(ctx, tx, &s, c, deferred); err != nil {
			return err
		}
		// The same session version, so the same append as staged before.
		staged, err := e.stageAppend(ctx, tx, &s, pr.input, pr.at, true, restartsHistory(in))
		if err != nil {
			return err
		}
		staged.shared = in.Shared
		if err := staged.write(ctx, tx, &s); err != nil {
			return err
		}
		if err := e.rememberAppend(ctx, tx, tenant, id, in.IdempotencyKey, hash, staged.msgs, s.Version); err != nil {
			return err
		}
		if deferred {
			res = p.result
			res.Warnings = waitNote(res.Warnings)
			res.view = pr.view
		} else if !p.plan.Changed() {
			s.Version++
			s.AutoPausedBelow = s.ActiveTokens + pauseSpan(p.model, p.policy)
			res = p.result
			res.Warnings = append(res.Warnings, fmt.Sprintf("nothing left to compact; auto-compaction paused until the conversation grows by %d tokens", pauseSpan(p.model, p.policy)))
			res.view = pr.view
			paused = true
		} else if res, err = writeCompaction(ctx, tx, &s, pr.view, c.prefix, p); err != nil {
			return err
		}
		if err := e.checkAnswerSize(&s, res.view, since); err != nil {
			return err
		}
		// The cache-hints row of the view this call answers, in this
		// transaction too.
		changedFrom := int64(-1)
		if !deferred && !paused && res.Compaction != nil {
			changedFrom = firstChange(res.Compaction.ViewBefore, res.Compaction.ViewAfter)
		}
		token := tokenOf(&s, []int64{lastViewOrd(&s)}).String()
		h, row, err := e.hintsInTx(ctx, tx, &s, true, res.view, token, changedFrom, nil)
		if err != nil {
			return err
		}
		pr.hints = &preparedHints{hints: h, version: s.Version, token: token, before: row}
		final = s
		return tx.UpdateSession(ctx, &s)
	})
	if err != nil {
		return PrepareResult{}, err
	}
	if jobDiscarded {
		e.metrics.Job("discarded")
	}
	if c.ready != nil && !deferred {
		e.metrics.JobApplied(c.ready.took)
	}
	if len(pr.appended) > 0 {
		e.notify(ctx, tenant, id, pr.after.Version, watch.EventAppended)
	}
	event := watch.EventCompacted
	switch {
	case len(pr.edits) > 0 && (deferred || paused):
		event = watch.EventCompacted // the edits
		e.editsWritten(ctx, &final, res.view)
	case deferred:
		event = watch.EventAppended
		e.views.appended(&pr.before, &final, pr.appended)
	case paused:
		event = watch.EventWarning
		e.views.appended(&pr.before, &final, pr.appended)
	default:
		e.views.wrote(&final, res.view, viewOrds(len(res.view)), messagesBytes(res.view))
		e.metrics.Compacted(res.Compaction.Tiers, res.Compaction.TokensBefore-res.Compaction.TokensAfter)
		e.sweepViews(ctx, tenant, id) // the view the compaction replaced
	}
	if !deferred || len(pr.edits) > 0 { // a deferred compaction changed nothing but the append, announced above
		e.notify(ctx, tenant, id, final.Version, event)
	}
	// Committed: what fails from here on is a warning on the answer (the
	// caller would retry an append that is already stored).
	pr.status.Version, pr.status.Compacted = final.Version, !paused && !deferred
	if v, err := e.viewCached(ctx, final, pr.cals); err != nil {
		e.log.WarnContext(ctx, "prepare: usage", "tenant", tenant, "session", id, "err", err)
		pr.status.Warnings = append(pr.status.Warnings, "usage after the compaction unavailable (this is the usage before it): "+err.Error())
	} else {
		pr.status.Usage = v.Usage
	}
	pr.after, pr.view = final, res.view
	if pr.status.Compacted {
		pr.status.LastCompaction = res.Compaction
	}
	pr.status.Warnings = append(pr.status.Warnings, res.Warnings...)
	return e.answerPrepare(ctx, tenant, id, pr, since)
}

// answerPrepare adds the hand-off warning, the latest compaction, the
// cache hints and the ledger to the status and returns the view.
func (e *Engine) answerPrepare(ctx context.Context, tenant, id string, pr prepared, since *viewToken) (PrepareResult, error) {
	st := pr.status
	out, of, err := e.prepareView(ctx, pr.after, since)
	switch {
	case err == nil && of.Version != pr.after.Version:
		// Another call changed the session after this one's write and the
		// view read is of that version: the status says so, so the view
		// and the status it is sent with agree.
		if v, verr := e.viewCached(ctx, of, pr.cals); verr == nil {
			st.Version, st.Usage = of.Version, v.Usage
			pr.after = of
		} else {
			out = PrepareResult{Messages: pr.view, view: pr.view}
			st.Warnings = append(st.Warnings, "the session kept changing: no view_token this time")
		}
	case errors.Is(err, store.ErrVersionConflict):
		// The session kept changing after this call's own write: answer
		// the view this call knows at its version, without a view token.
		out = PrepareResult{Messages: pr.view, view: pr.view}
		st.Warnings = append(st.Warnings, "the session kept changing: no view_token this time")
	case err != nil:
		// The append (and compaction) may be committed: never an error
		// now. The view this call wrote is the answer, without a token.
		e.log.WarnContext(ctx, "prepare: view", "tenant", tenant, "session", id, "err", err)
		out = PrepareResult{Messages: pr.view, view: pr.view}
		st.Warnings = append(st.Warnings, "view_token unavailable: "+err.Error())
	}
	if st.Usage.Level == compaction.LevelHandoff {
		st.Warnings = append(st.Warnings, st.Usage.Recommendation)
	}
	// A session at its warning level whose next compaction will summarize
	// has it prepared in the background (background.go).
	if u := st.Usage; !pr.hasJob && u.Level >= compaction.LevelCompact && u.Policy.AutoCompact &&
		(u.Level >= compaction.LevelSummarize || pr.summaryAhead || pausedNow(&pr.after)) {
		e.schedule(ctx, &pr.after)
	}
	if st.LastCompaction == nil && pr.after.CompactionRound > 0 {
		if c, err := e.store.LatestCompaction(ctx, tenant, id); err == nil {
			st.LastCompaction = &c
		}
	}
	out.Status = st
	out.Tools = extraTools(pr.after.Policy)
	e.finishPrepare(ctx, tenant, id, &out, pr.hints, pr.noLedger)
	return out, nil
}
