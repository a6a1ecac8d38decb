package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/summarize"
	"github.com/contextd/contextd/internal/tokens"
	"github.com/contextd/contextd/internal/watch"
)

// DefaultRevertWindow is how long a compaction can be reverted.
const DefaultRevertWindow = 24 * time.Hour

// minSavings is the share of used tokens a compaction must save; below it,
// auto-compaction pauses for the session (no compaction loops).
const minSavings = 0.05

// CompactInput is a Compact request.
type CompactInput struct {
	// Tier limits compaction to one tier; empty means automatic (prune and
	// summarize, drop-middle only if the request would not fit).
	Tier   compaction.Tier
	DryRun bool
	// DryRunLLM lets a dry run call the session's LLM summarizer (a billed
	// provider call); without it a dry run plans with the extractive one.
	DryRunLLM    bool
	Instructions string
	// Target overrides the policy's target fraction.
	Target *float64
	// tiers overrides the tiers (PrepareContext picks them by level).
	tiers []compaction.Tier
	// payback, when positive, applies the plan only if it repays its
	// prompt-cache rewrite within that many calls (cache-aware compaction).
	payback int
	// estimate plans with the extractive summarizer whatever the policy's:
	// a cache-aware payback decision must not buy an LLM summary.
	estimate bool
	// background: a job plans it; an LLM that fails fails the plan (the
	// job is tried again later) instead of falling back.
	background bool
}

// CompactResult is what a compaction did (or, for a dry run, would do).
type CompactResult struct {
	Compacted  bool
	DryRun     bool
	Compaction *store.Compaction // the record (also filled for a dry run, not stored)
	Usage      Usage
	Version    int64
	Warnings   []string
	// Nothing says why nothing was compacted (NothingNone when something
	// was), NothingDetail the same with the figures.
	Nothing       NothingReason
	NothingDetail string
	// view is the active view after a compaction, for PrepareContext, and
	// session the session as the compaction left it.
	view    []chat.Message
	session store.Session
}

// Status is a snapshot of a session's context, as PrepareContext returns it
// and watchers receive it.
type Status struct {
	SessionID      string
	Version        int64
	Usage          Usage
	Compacted      bool
	LastCompaction *store.Compaction
	Warnings       []string
	Time           time.Time
	// Ledger is what the session has cost so far (nil when not read).
	Ledger *store.Ledger
	// LogCount is the position of the log's newest message and Created
	// the session's incarnation: a caller that appends later (the
	// gateway's reply) tells "only reports came in between" from "the log
	// grew" or "the session was made again" by them.
	LogCount int64
	Created  time.Time
}

// Compact compacts a session's active view now.
//
// It plans on a snapshot outside any transaction, because an LLM summarizer
// may take seconds, then applies the plan in one transaction that holds the
// session's compaction lock (an advisory lock on PostgreSQL) and its row
// lock, and only if the view is still the snapshot's: messages appended in
// the meantime are kept after the compacted view; if another compaction or a
// revert came first, it plans again on the new view (where there is usually
// nothing left to do). So concurrent compactions of one session through any
// number of replicas produce one compaction, and no append is lost.
func (e *Engine) Compact(ctx context.Context, tenant, id string, in CompactInput) (CompactResult, error) {
	for attempt := 1; ; attempt++ {
		snap, err := e.snapshot(ctx, tenant, id)
		if err != nil {
			return CompactResult{}, err
		}
		p, err := e.plan(ctx, snap, in)
		if err != nil {
			return CompactResult{}, err
		}
		res := p.result
		switch {
		case in.DryRun:
			v, err := e.view(ctx, snap.session)
			res.Usage, res.Version = v.Usage, snap.session.Version
			return res, err
		case p.plan.Changed() && e.deferred(p, snap, in):
			return e.deferCompaction(ctx, snap, res)
		case !p.plan.Changed():
			return e.nothingToCompact(ctx, snap, res)
		}
		res, err = e.apply(ctx, tenant, id, snap, p)
		if errors.Is(err, errStale) && attempt < 3 {
			continue
		}
		if errors.Is(err, errStale) {
			return CompactResult{}, fmt.Errorf("the session kept changing under the compaction; try again: %w", store.ErrVersionConflict)
		}
		if err != nil {
			return CompactResult{}, err
		}
		e.metrics.Compacted(res.Compaction.Tiers, res.Compaction.TokensBefore-res.Compaction.TokensAfter)
		event := watch.EventCompacted
		e.notify(ctx, tenant, id, res.Version, event)
		return res, nil
	}
}

// errStale means the view changed between planning and applying.
var errStale = errors.New("view changed since the plan")

// snapshot is a session and its active view, read without locks, repaired
// first if it holds interrupted calls without results (repair.go).
type snapshot struct {
	session store.Session
	view    []chat.Message
}

func (e *Engine) snapshot(ctx context.Context, tenant, id string) (snapshot, error) {
	s, err := e.readSession(ctx, tenant, id)
	if err != nil {
		return snapshot{}, err
	}
	view, _, s, err := e.viewOf(ctx, s)
	if err != nil || !needsRepair(view) || len(danglingCalls(view)) == 0 {
		return snapshot{session: s, view: view}, err
	}
	if err := e.repairInterrupted(ctx, tenant, id); err != nil {
		return snapshot{}, err
	}
	if s, err = e.readSession(ctx, tenant, id); err != nil {
		return snapshot{}, err
	}
	view, _, s, err = e.viewOf(ctx, s)
	return snapshot{session: s, view: view}, err
}

// planned is a plan, the record it would write and the result so far.
type planned struct {
	plan   *compaction.Plan
	record *store.Compaction
	result CompactResult
	model  tokens.Model
	policy compaction.Policy
	// estimated: planned with the extractive summarizer in place of the
	// session's LLM one (CompactInput.estimate).
	estimated bool
}

// plan runs the planner (and the summarizer) on a snapshot.
func (e *Engine) plan(ctx context.Context, snap snapshot, in CompactInput) (planned, error) {
	s, view := snap.session, snap.view
	m, _, enc, err := e.modelFor(s.Model)
	if err != nil {
		return planned{}, err
	}
	policy, err := compaction.Resolve("policy", s.Policy, m.ContextWindow)
	if err != nil {
		policy = compaction.Defaults(m.ContextWindow)
	}
	policy.NoExpandRPC = callsNoRPC(s)
	target := policy.Target
	if in.Target != nil {
		target = *in.Target
	}
	tiers := in.tiers
	switch {
	case tiers != nil:
	case in.Tier != "":
		tiers = []compaction.Tier{in.Tier}
	default:
		tiers = compaction.AllTiers
	}
	fr := tokens.FramingOf(m)
	round := s.CompactionRound + 1
	seq := 0
	out := planned{model: m, policy: policy}
	out.result.DryRun = in.DryRun
	summarizer, isLLM, err := e.summarizers.Resolve(policy.Summarizer)
	if err != nil {
		out.result.Warnings = append(out.result.Warnings, fmt.Sprintf("%v; using the extractive summarizer", err))
		summarizer, isLLM = summarize.Extractive{}, false
	}
	if isLLM && in.DryRun && !in.DryRunLLM {
		out.result.Warnings = append(out.result.Warnings, "dry run: the summary is planned with the extractive summarizer, not the session's LLM (set dry_run_llm to call it)")
		summarizer, isLLM = summarize.Extractive{}, false
	}
	if isLLM && in.estimate {
		summarizer, isLLM, out.estimated = summarize.Extractive{}, false, true
	}
	summarizerName := policy.Summarizer
	if summarizerName == "" {
		summarizerName = e.summarizers.Default
	}
	summarizeFn := func(si compaction.SummaryInput) (string, error) {
		start := time.Now()
		text, warning, err := e.summarizeMetered(ctx, summarizer, s.Tenant, s.ID, si)
		e.metrics.Summarized(summarizerName, time.Since(start), err != nil)
		if warning != "" {
			out.result.Warnings = append(out.result.Warnings, warning)
		}
		if !isLLM {
			return text, err
		}
		// Every attempt counts, a failed one too: one cut short by the
		// call's deadline says the LLM takes at least that long.
		e.observeLLM(s.Tenant, summarizerName, time.Since(start))
		if err != nil && in.background {
			return "", err
		}
		if err != nil {
			// An LLM that is down never fails the call: fall back and say so,
			// in a few words (the provider's text stays in the log).
			e.log.WarnContext(ctx, "llm summarizer failed", "summarizer", summarizerName, "session", s.ID, "error", summarize.LogDetail(err))
			out.result.Warnings = append(out.result.Warnings, "LLM summarizer failed ("+summarize.PublicError(err)+"), used the extractive summary instead")
			return summarize.Extractive{}.Summarize(ctx, si)
		}
		return summarize.PinFacts(text, si), nil
	}
	plan, err := compaction.PlanCompaction(compaction.Request{
		View: view, OriginalTaskID: originalTask(view), Fixed: s.SystemTokens + s.ToolsTokens + int64(fr.ReplyPriming),
		Window: m.ContextWindow, Policy: policy, Target: target, Tiers: tiers, Round: round, Instructions: in.Instructions,
		Count:     func(msg *chat.Message) int64 { return tokens.CountMessage(enc, fr, msg).Tokens },
		CountText: enc.Count,
		Summarize: summarizeFn,
		Trail:     summarize.MeasureTrail,
		NewID: func(k chat.Kind) string {
			seq++
			prefix := "ph"
			if k == chat.KindSummary {
				prefix = "sum"
			}
			return fmt.Sprintf("%s_%d_%d", prefix, round, seq)
		},
	})
	if errors.Is(err, compaction.ErrTooLarge) {
		return planned{}, fmt.Errorf("%w: %w", ErrFailedPrecondition, err)
	}
	if err != nil {
		return planned{}, err
	}
	if plan.SummaryFailed != nil {
		out.result.Warnings = append(out.result.Warnings, "summarizer failed; the summarize tier was skipped: "+plan.SummaryFailed.Error())
	}
	out.plan = plan
	if !plan.Changed() {
		out.result.Nothing, out.result.NothingDetail = nothingToDo(view, plan, policy, m.ContextWindow, target, tiers)
		return out, nil
	}
	rec := e.compactionRecord(plan, round, view)
	out.record, out.result.Compaction = rec, rec
	return out, nil
}

// compactionRecord is the record of a plan of round made on view.
func (e *Engine) compactionRecord(plan *compaction.Plan, round int, view []chat.Message) *store.Compaction {
	now := e.timestamp()
	rec := &store.Compaction{
		ID: fmt.Sprintf("cmp_%d", round), Round: round, TokensBefore: plan.TokensBefore, TokensAfter: plan.TokensAfter,
		Summary: plan.Summary, CreatedAt: now, ExpiresAt: now.Add(e.revertWindow),
		ViewBefore: idsOf(view), ViewAfter: idsOf(plan.View),
	}
	for _, t := range plan.Tiers {
		rec.Tiers = append(rec.Tiers, string(t))
	}
	for _, it := range plan.Items {
		rec.Items = append(rec.Items, store.CompactionItem{Tier: string(it.Tier), NewID: it.NewID, Replaced: it.Replaced,
			Reason: it.Reason, TokensBefore: it.TokensBefore, TokensAfter: it.TokensAfter})
	}
	return rec
}

// lockedView takes the session's compaction lock and reads (and locks) the
// session and its active view.
func lockedView(ctx context.Context, tx store.Tx, tenant, id string) (store.Session, []chat.Message, error) {
	if err := tx.LockCompaction(ctx, tenant, id); err != nil {
		return store.Session{}, nil, err
	}
	s, err := lockedSession(ctx, tx, tenant, id)
	if err != nil {
		return store.Session{}, nil, err
	}
	view, err := tx.ViewMessages(ctx, tenant, id)
	return s, view, err
}

// apply writes a plan if the view is still the snapshot's (messages
// appended since stay, after the compacted view).
func (e *Engine) apply(ctx context.Context, tenant, id string, snap snapshot, p planned) (CompactResult, error) {
	res := p.result
	var final store.Session
	err := e.store.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		s, view, err := lockedView(ctx, tx, tenant, id)
		if err != nil {
			return err
		}
		if s.ViewEpoch != snap.session.ViewEpoch || len(view) < len(snap.view) || !equalIDs(idsOf(view[:len(snap.view)]), idsOf(snap.view)) {
			return errStale
		}
		if res, err = writeCompaction(ctx, tx, &s, view, len(snap.view), p); err != nil {
			return err
		}
		final = s
		return tx.UpdateSession(ctx, &s)
	})
	if err != nil {
		return CompactResult{}, err
	}
	e.views.wrote(&final, res.view, viewOrds(len(res.view)), messagesBytes(res.view))
	e.sweepViews(ctx, tenant, id) // the view the compaction replaced
	v, err := e.view(ctx, final)
	res.Compacted, res.Usage, res.Version, res.session = true, v.Usage, final.Version, final
	return res, err
}

// writeCompaction stores a plan made on view[:planned] (messages after it
// were appended since and follow the compacted view) and updates s in
// memory; the caller writes s.
func writeCompaction(ctx context.Context, tx store.Tx, s *store.Session, view []chat.Message, planned int, p planned) (CompactResult, error) {
	res := p.result
	tenant, id := s.Tenant, s.ID
	appended := view[planned:]
	rec := *p.record
	rec.ViewBefore = idsOf(view)
	rec.ViewAfter = append(idsOf(p.plan.View), idsOf(appended)...)
	replaces := map[string][]string{}
	for _, it := range p.plan.Items {
		replaces[it.NewID] = it.Replaced
	}
	fresh := make([]chat.Message, len(p.plan.New))
	for i, msg := range p.plan.New {
		msg.CreatedAt, msg.Replaces, msg.Position = rec.CreatedAt, replaces[msg.ID], 0
		fresh[i] = msg
	}
	if err := tx.InsertMessages(ctx, tenant, id, fresh); err != nil {
		return res, err
	}
	if err := tx.ReplaceView(ctx, tenant, id, rec.ViewAfter); err != nil {
		return res, err
	}
	if err := tx.InsertCompaction(ctx, tenant, id, &rec); err != nil {
		return res, err
	}
	s.Version++
	s.ViewEpoch++ // the anchor, if any, described the old view
	s.CompactionRound = rec.Round
	s.ActiveTokens = sumTokens(p.plan.View) + sumTokens(appended)
	s.ActiveBytes = viewBytes(p.plan.View) + viewBytes(appended)
	s.ActiveCount = int64(len(rec.ViewAfter))
	s.ViewSeq = s.ActiveCount
	s.UpdatedAt = rec.CreatedAt
	s.AutoPausedBelow = 0
	if saved := float64(rec.TokensBefore-rec.TokensAfter) / float64(max(rec.TokensBefore, 1)); saved < minSavings {
		s.AutoPausedBelow = s.ActiveTokens + pauseSpan(p.model, p.policy)
		res.Warnings = append(res.Warnings, fmt.Sprintf("compaction saved only %.1f%%; auto-compaction paused until the conversation grows by %d tokens", 100*saved, pauseSpan(p.model, p.policy)))
	}
	res.Compaction = &rec
	// The view as stored: synthetic messages with their timestamps and
	// what they replace.
	stored := make(map[string]chat.Message, len(fresh))
	for _, m := range fresh {
		stored[m.ID] = m
	}
	res.view = make([]chat.Message, 0, len(rec.ViewAfter))
	for _, m := range p.plan.View {
		if f, ok := stored[m.ID]; ok {
			m = f
		}
		res.view = append(res.view, m)
	}
	res.view = append(res.view, appended...)
	return res, nil
}

// nothingToCompact answers a compaction that found nothing to do.
func (e *Engine) nothingToCompact(ctx context.Context, snap snapshot, res CompactResult) (CompactResult, error) {
	v, err := e.view(ctx, snap.session)
	res.Usage, res.Version = v.Usage, snap.session.Version
	return res, err
}

// pauseSpan is how much the conversation must grow to resume
// auto-compaction after a compaction that saved too little: 5 % of the
// usable window.
func pauseSpan(m tokens.Model, p compaction.Policy) int64 {
	return max(1, (m.ContextWindow-p.ReservedOutputTokens)*5/100)
}

// originalTask is the id of the session's original task: its first
// human-authored user message (chat.HumanAuthored: Codex CLI sends its
// <environment_context> as a user message of its own before what the
// person typed), else its first user message.
func originalTask(view []chat.Message) string {
	first := ""
	for i := range view {
		m := &view[i]
		// A stand-in whose scaffolding was pruned (compaction.IsStandIn)
		// is the message it stands in for, what was typed in it kept.
		standIn := compaction.IsStandIn(m)
		if m.Role != chat.RoleUser || m.Kind != chat.KindNormal && !standIn {
			continue
		}
		if standIn && compaction.StandInTyped(m) || !standIn && chat.HumanAuthored(m) {
			return m.ID
		}
		if first == "" {
			first = m.ID
		}
	}
	return first
}

func idsOf(msgs []chat.Message) []string {
	out := make([]string, len(msgs))
	for i := range msgs {
		out[i] = msgs[i].ID
	}
	return out
}

func sumTokens(msgs []chat.Message) int64 {
	var n int64
	for i := range msgs {
		n += msgs[i].Tokens
	}
	return n
}

// activeView reads the whole active view.
func (e *Engine) activeView(ctx context.Context, tenant, id string) ([]chat.Message, error) {
	msgs, _, err := e.activeAfter(ctx, tenant, id, 0)
	return msgs, err
}

// revertPage is how many later compactions Revert reads at once.
const revertPage = 64

// RevertCompaction restores the active view from before a compaction,
// keeping messages appended since. Later compactions must be reverted first.
//
// The restored view is read and staged before the transaction, a batch a
// transaction (viewrewrite.go); the transaction checks the view only grew
// meanwhile, adds what was appended and makes the staged view the
// session's.
func (e *Engine) RevertCompaction(ctx context.Context, tenant, id, compactionID string) (SessionView, error) {
	for attempt := 1; ; attempt++ {
		v, err := e.revertOnce(ctx, tenant, id, compactionID)
		if !errors.Is(err, errViewMoved) || attempt == rewriteAttempts {
			return v, err
		}
	}
}

func (e *Engine) revertOnce(ctx context.Context, tenant, id, compactionID string) (SessionView, error) {
	preModel, pre := e.precountRevert(ctx, tenant, id, compactionID)
	st, err := e.stageRevert(ctx, tenant, id, compactionID)
	if err != nil {
		return SessionView{}, err
	}
	var final store.Session
	repair := false
	err = e.store.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		if err := tx.LockCompaction(ctx, tenant, id); err != nil {
			return err
		}
		s, err := lockedSession(ctx, tx, tenant, id)
		if err != nil {
			return err
		}
		c, err := tx.GetCompaction(ctx, tenant, id, compactionID)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("compaction %q: %w", compactionID, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		now := e.timestamp()
		switch {
		case c.RevertedAt != nil:
			return fmt.Errorf("compaction %q was already reverted: %w", compactionID, ErrFailedPrecondition)
		case now.After(c.ExpiresAt):
			return fmt.Errorf("compaction %q can no longer be reverted (its window ended %s): %w", compactionID, c.ExpiresAt.Format(time.RFC3339), ErrFailedPrecondition)
		}
		// Only the newest applied compaction can be reverted: the lock held
		// keeps others from committing meanwhile. The later ones are read a
		// page at a time.
		for after := c.Round; ; {
			later, err := e.store.ListCompactions(ctx, tenant, id, after, revertPage)
			if err != nil {
				return err
			}
			for _, l := range later {
				if l.RevertedAt == nil {
					return fmt.Errorf("compaction %q is newer and still applied; revert it first (only the newest applied compaction can be reverted): %w", l.ID, ErrFailedPrecondition)
				}
			}
			if len(later) < revertPage {
				break
			}
			after = later[len(later)-1].Round
		}
		var view, msgs, extra []chat.Message
		var ids []string
		if st != nil {
			// Read and staged before: only what was appended since is read.
			if extra, err = e.grownSince(ctx, &s, &st.read); err != nil {
				return err
			}
			view = append(st.view[:len(st.view):len(st.view)], extra...)
			ids = append(st.ids[:len(st.ids):len(st.ids)], idsOf(extra)...)
			msgs = append(st.msgs[:len(st.msgs):len(st.msgs)], extra...)
		} else {
			if view, err = tx.ViewMessages(ctx, tenant, id); err != nil {
				return err
			}
			cur := idsOf(view)
			if len(cur) < len(c.ViewAfter) || !equalIDs(cur[:len(c.ViewAfter)], c.ViewAfter) {
				return fmt.Errorf("a later compaction changed the active view; revert it first: %w", ErrFailedPrecondition)
			}
			ids = append(append([]string{}, c.ViewBefore...), cur[len(c.ViewAfter):]...)
			if msgs, err = tx.MessagesByID(ctx, tenant, id, ids); err != nil {
				return err
			}
		}
		// The restored view passes the checks of any edited view; a gap
		// left by a session stored before interrupted calls were recorded
		// is repaired right after, as PrepareContext would.
		if repair = needsRepair(msgs) && len(danglingCalls(msgs)) > 0; !repair {
			if err := validEditedView(msgs); err != nil {
				return err
			}
		}
		if err := e.recountRestored(ctx, tx, &s, msgs, view, preModel, pre); err != nil {
			return err
		}
		if st != nil {
			if err := tx.StageView(ctx, tenant, id, st.gen, store.Entries(idsOf(extra), int64(len(st.ids)))); err != nil {
				return err
			}
			if err := tx.FlipView(ctx, tenant, id, st.gen, len(ids)); errors.Is(err, store.ErrVersionConflict) {
				return errViewMoved // a sweep took staged rows: stage again
			} else if err != nil {
				return err
			}
		} else if err := tx.ReplaceView(ctx, tenant, id, ids); err != nil {
			return err
		}
		if err := tx.MarkReverted(ctx, tenant, id, compactionID, now); err != nil {
			return err
		}
		s.Version++
		s.ViewEpoch++
		s.ActiveTokens, s.ActiveCount, s.ViewSeq = sumTokens(msgs), int64(len(msgs)), int64(len(msgs))
		s.ActiveBytes = viewBytes(msgs)
		s.AutoPausedBelow = s.ActiveTokens + 1 // a revert is deliberate: do not re-compact at once
		s.UpdatedAt = now
		final = s
		return tx.UpdateSession(ctx, &s)
	})
	if st != nil || err == nil {
		e.sweepViews(ctx, tenant, id) // the replaced view, or what was staged for nothing
	}
	if err != nil {
		return SessionView{}, err
	}
	e.notify(ctx, tenant, id, final.Version, watch.EventReverted)
	if repair {
		if err := e.repairInterrupted(ctx, tenant, id); err != nil {
			e.log.WarnContext(ctx, "revert: repair", "tenant", tenant, "session", id, "err", err)
		} else if s, err := e.readSession(ctx, tenant, id); err == nil {
			final = s
		}
	}
	return e.view(ctx, final)
}

// recountRestored brings the counts of the messages a revert restores
// (those not in the current view) up to the session's model: only those
// whose stored count was made for another encoding or framing (or is of
// unknown origin) are counted, and pre (counted before the transaction, for
// preModel) is used when the model is still the same; what is left is
// counted here. Rewritten counts are stored with their key. A message the
// counter rejects keeps its old count (recountStale), so a revert never
// fails for counting.
func (e *Engine) recountRestored(ctx context.Context, tx store.Tx, s *store.Session, msgs, current []chat.Message, preModel string, pre map[string]int64) error {
	key, err := e.countKey(s.Model)
	if err != nil {
		return err
	}
	inView := make(map[string]bool, len(current))
	for i := range current {
		inView[current[i].ID] = true
	}
	if preModel != s.Model {
		pre = nil
	}
	counts := map[string]int64{}
	var left []chat.Message
	for i := range msgs {
		if m := &msgs[i]; !inView[m.ID] && m.CountedFor != key {
			if n, ok := pre[m.ID]; ok {
				counts[m.ID] = n
			} else {
				left = append(left, *m)
			}
		}
	}
	for id, n := range e.recountStale(ctx, s.Model, key, left) {
		counts[id] = n
	}
	if len(counts) == 0 {
		return nil
	}
	for i := range msgs {
		if n, ok := counts[msgs[i].ID]; ok {
			msgs[i].Tokens, msgs[i].CountedFor = n, key
		}
	}
	return tx.SetMessageTokens(ctx, s.Tenant, s.ID, counts, key)
}

// precountRevert counts, before RevertCompaction's transaction, the
// messages the revert would restore whose counts are stale for the
// session's model, so the tokenizing happens outside the session lock (and
// outside SQLite's one writer). It reads without locking; the transaction
// re-reads everything and uses these counts only when the session's model
// is still the one returned. Any error here only means nothing is
// precounted: the transaction reports it, or counts what is left.
func (e *Engine) precountRevert(ctx context.Context, tenant, id, compactionID string) (string, map[string]int64) {
	s, err := e.readSession(ctx, tenant, id)
	if err != nil {
		return "", nil
	}
	key, err := e.countKey(s.Model)
	if err != nil {
		return "", nil
	}
	// Usually the one reverted is the newest (only the newest applied one
	// can be); when later ones were reverted before, the transaction counts.
	c, err := e.store.LatestCompaction(ctx, tenant, id)
	if err != nil || c.ID != compactionID || c.RevertedAt != nil {
		return "", nil
	}
	view, err := e.activeView(ctx, tenant, id)
	if err != nil {
		return "", nil
	}
	inView := make(map[string]bool, len(view))
	for i := range view {
		inView[view[i].ID] = true
	}
	var ids []string
	for _, mid := range c.ViewBefore {
		if !inView[mid] {
			ids = append(ids, mid)
		}
	}
	var stale []chat.Message
	for i := 0; i < len(ids); i += expandChunk {
		chunk, err := e.store.MessagesByID(ctx, tenant, id, ids[i:min(i+expandChunk, len(ids))])
		if err != nil {
			return "", nil
		}
		for j := range chunk {
			if chunk[j].CountedFor != key {
				stale = append(stale, chunk[j])
			}
		}
	}
	return s.Model, e.recountStale(ctx, s.Model, key, stale)
}

// SessionStatus is the current status of a session, as watchers get it.
func (e *Engine) SessionStatus(ctx context.Context, tenant, id string) (Status, error) {
	// The summary row: no system prompt, tools, compaction items or views
	// are read for a status, whatever the session holds.
	v, err := e.sessionSummary(ctx, tenant, id)
	if err != nil {
		return Status{}, err
	}
	return v.Status(e.now().UTC()), nil
}

func equalIDs(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// HandoffInput is a CreateHandoff request.
type HandoffInput struct {
	// NewSession starts a session seeded with the document.
	NewSession   bool
	NewSessionID string
}

// Handoff is a hand-off document and, when asked, the new session.
type Handoff struct {
	Document string
	Session  *SessionView
}

// CreateHandoff writes a hand-off document of the session (CURRENT, DONE,
// IN_PROGRESS, NEXT, FILES, ISSUES), optionally starting a new session with
// the same model, system prompt, tools and policy whose first message is the
// document (pinned).
func (e *Engine) CreateHandoff(ctx context.Context, tenant, id string, in HandoffInput) (Handoff, error) {
	s, err := e.readSession(ctx, tenant, id)
	if err != nil {
		return Handoff{}, err
	}
	view, err := e.activeView(ctx, tenant, id)
	if err != nil {
		return Handoff{}, err
	}
	out := Handoff{Document: summarize.Handoff(view, id)}
	if !in.NewSession {
		return out, nil
	}
	// The parent's labels are copied, then the parent is set: a hand-off of
	// a hand-off names its own parent, not the grandparent it inherited.
	labels := make(map[string]string, len(s.Labels)+1)
	for k, v := range s.Labels {
		labels[k] = v
	}
	labels["contextd.handoff_from"] = id
	nv, err := e.CreateSession(ctx, tenant, NewSession{ID: in.NewSessionID, Model: s.Model, System: s.SystemPrompt,
		Tools: s.Tools, Policy: s.Policy, Labels: labels})
	if err != nil {
		return Handoff{}, err
	}
	doc := chat.Message{Role: chat.RoleUser, Pinned: true, Parts: []chat.Part{{Type: chat.PartText, Text: out.Document}},
		Metadata: map[string]string{"contextd.handoff_from": id}}
	if _, err := e.AppendMessages(ctx, tenant, nv.ID, AppendInput{Messages: []chat.Message{doc}}); err != nil {
		return Handoff{}, err
	}
	seeded, err := e.GetSession(ctx, tenant, nv.ID)
	if err != nil {
		return Handoff{}, err
	}
	out.Session = &seeded
	return out, nil
}
