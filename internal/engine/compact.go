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

// errDryRun rolls back a dry run's transaction.
var errDryRun = errors.New("dry run")

// CompactInput is a Compact request.
type CompactInput struct {
	// Tier limits compaction to one tier; empty means automatic (prune and
	// summarize, drop-middle only if the request would not fit).
	Tier         compaction.Tier
	DryRun       bool
	Instructions string
	// Target overrides the policy's target fraction.
	Target *float64
	// auto marks compactions started by PrepareContext.
	auto bool
	// tiers overrides the tiers (PrepareContext picks them by level).
	tiers []compaction.Tier
}

// CompactResult is what a compaction did (or, for a dry run, would do).
type CompactResult struct {
	Compacted  bool
	DryRun     bool
	Compaction *store.Compaction // the record (also filled for a dry run, not stored)
	Usage      Usage
	Version    int64
	Warnings   []string
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
}

// Compact compacts a session's active view now.
func (e *Engine) Compact(ctx context.Context, tenant, id string, in CompactInput) (CompactResult, error) {
	var res CompactResult
	err := e.store.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		var err error
		res, err = e.compactTx(ctx, tx, tenant, id, in)
		if err == nil && in.DryRun {
			return errDryRun
		}
		return err
	})
	if errors.Is(err, errDryRun) {
		err = nil
	}
	switch {
	case err != nil || in.DryRun:
	case res.Compacted:
		e.metrics.Compacted(res.Compaction.Tiers, res.Compaction.TokensBefore-res.Compaction.TokensAfter)
		e.notify(ctx, tenant, id, res.Version, watch.EventCompacted)
	case len(res.Warnings) > 0:
		e.notify(ctx, tenant, id, res.Version, watch.EventWarning)
	}
	return res, err
}

// compactTx plans and applies a compaction inside a transaction that holds
// the session's compaction lock and row lock: concurrent compactions of one
// session run one after the other (the second finds nothing left to do), and
// appends wait for the compaction instead of being lost.
func (e *Engine) compactTx(ctx context.Context, tx store.Tx, tenant, id string, in CompactInput) (CompactResult, error) {
	if err := tx.LockCompaction(ctx, tenant, id); err != nil {
		return CompactResult{}, err
	}
	s, err := tx.GetSession(ctx, tenant, id)
	if errors.Is(err, store.ErrNotFound) {
		return CompactResult{}, fmt.Errorf("session %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return CompactResult{}, err
	}
	view, err := tx.ViewMessages(ctx, tenant, id)
	if err != nil {
		return CompactResult{}, err
	}
	m, _, enc, err := e.modelFor(s.Model)
	if err != nil {
		return CompactResult{}, err
	}
	policy, err := compaction.Resolve("policy", s.Policy, m.ContextWindow)
	if err != nil {
		policy = compaction.Defaults(m.ContextWindow)
	}
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
	var res CompactResult
	summarizer, isLLM, err := e.summarizers.Get(policy.Summarizer)
	if err != nil {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%v; using the extractive summarizer", err))
		summarizer, isLLM = summarize.Extractive{}, false
	}
	summarizerName := policy.Summarizer
	if summarizerName == "" {
		summarizerName = e.summarizers.Default
	}
	summarizeFn := func(si compaction.SummaryInput) (string, error) {
		start := time.Now()
		text, err := summarizer.Summarize(ctx, si)
		e.metrics.Summarized(summarizerName, time.Since(start), err != nil)
		if !isLLM {
			return text, err
		}
		if err != nil {
			// An LLM that is down never fails the call: fall back and say so.
			res.Warnings = append(res.Warnings, "LLM summarizer failed, used the extractive summary instead: "+err.Error())
			return summarize.Extractive{}.Summarize(ctx, si)
		}
		return summarize.PinFacts(text, si), nil
	}
	req := compaction.Request{
		View: view, OriginalTaskID: originalTask(view), Fixed: s.SystemTokens + s.ToolsTokens + int64(fr.ReplyPriming),
		Window: m.ContextWindow, Policy: policy, Target: target, Tiers: tiers, Round: round, Instructions: in.Instructions,
		Count:     func(msg *chat.Message) int64 { return tokens.CountMessage(enc, fr, msg).Tokens },
		CountText: enc.Count,
		Summarize: summarizeFn,
		NewID: func(k chat.Kind) string {
			seq++
			prefix := "ph"
			if k == chat.KindSummary {
				prefix = "sum"
			}
			return fmt.Sprintf("%s_%d_%d", prefix, round, seq)
		},
	}
	plan, err := compaction.PlanCompaction(req)
	if errors.Is(err, compaction.ErrTooLarge) {
		return CompactResult{}, fmt.Errorf("%w: %w", ErrFailedPrecondition, err)
	}
	if err != nil {
		return CompactResult{}, err
	}
	res.DryRun = in.DryRun
	if plan.SummaryFailed != nil {
		res.Warnings = append(res.Warnings, "summarizer failed; the summarize tier was skipped: "+plan.SummaryFailed.Error())
	}
	now := e.timestamp()
	saved := float64(plan.TokensBefore-plan.TokensAfter) / float64(max(plan.TokensBefore, 1))
	if !plan.Changed() {
		if in.auto && !in.DryRun {
			// Nothing left to compact: pause instead of retrying every call.
			s.AutoPausedBelow = s.ActiveTokens + pauseSpan(m, policy)
			if err := tx.UpdateSession(ctx, &s); err != nil {
				return CompactResult{}, err
			}
			res.Warnings = append(res.Warnings, fmt.Sprintf("nothing left to compact; auto-compaction paused until the conversation grows by %d tokens", pauseSpan(m, policy)))
		}
		v, err := e.view(ctx, s)
		res.Usage, res.Version = v.Usage, s.Version
		return res, err
	}
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
	res.Compaction = rec
	if in.DryRun {
		v, err := e.view(ctx, s)
		res.Usage, res.Version = v.Usage, s.Version
		return res, err
	}
	replaces := map[string][]string{}
	for _, it := range plan.Items {
		replaces[it.NewID] = it.Replaced
	}
	fresh := make([]chat.Message, len(plan.New))
	for i, msg := range plan.New {
		msg.CreatedAt, msg.Replaces, msg.Position = now, replaces[msg.ID], 0
		fresh[i] = msg
	}
	if err := tx.InsertMessages(ctx, tenant, id, fresh); err != nil {
		return CompactResult{}, err
	}
	if err := tx.ReplaceView(ctx, tenant, id, rec.ViewAfter); err != nil {
		return CompactResult{}, err
	}
	if err := tx.InsertCompaction(ctx, tenant, id, rec); err != nil {
		return CompactResult{}, err
	}
	s.Version++
	s.ViewEpoch++ // the anchor, if any, described the old view
	s.CompactionRound = round
	s.ActiveTokens, s.ActiveCount, s.ViewSeq = sumTokens(plan.View), int64(len(plan.View)), int64(len(plan.View))
	s.UpdatedAt = now
	s.AutoPausedBelow = 0
	if saved < minSavings {
		s.AutoPausedBelow = s.ActiveTokens + pauseSpan(m, policy)
		res.Warnings = append(res.Warnings, fmt.Sprintf("compaction saved only %.1f%%; auto-compaction paused until the conversation grows by %d tokens", 100*saved, pauseSpan(m, policy)))
	}
	if err := tx.UpdateSession(ctx, &s); err != nil {
		return CompactResult{}, err
	}
	v, err := e.view(ctx, s)
	res.Compacted, res.Usage, res.Version = true, v.Usage, s.Version
	return res, err
}

// pauseSpan is how much the conversation must grow to resume
// auto-compaction after a compaction that saved too little: 5 % of the
// usable window.
func pauseSpan(m tokens.Model, p compaction.Policy) int64 {
	return max(1, (m.ContextWindow-p.ReservedOutputTokens)*5/100)
}

func originalTask(view []chat.Message) string {
	for _, m := range view {
		if m.Role == chat.RoleUser && m.Kind == chat.KindNormal {
			return m.ID
		}
	}
	return ""
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

// PrepareInput is a PrepareContext request.
type PrepareInput struct {
	Messages        []chat.Message
	IdempotencyKey  string
	ExpectedVersion *int64
}

// PrepareResult is what to send to the model, and the status.
type PrepareResult struct {
	Messages []chat.Message
	Status   Status
}

// PrepareContext is the one call an agent makes before each model call:
// append the new messages, compact if the policy says so, and return the
// active view to send with the status.
func (e *Engine) PrepareContext(ctx context.Context, tenant, id string, in PrepareInput) (PrepareResult, error) {
	if len(in.Messages) > 0 {
		if _, err := e.AppendMessages(ctx, tenant, id, AppendInput{Messages: in.Messages,
			ExpectedVersion: in.ExpectedVersion, IdempotencyKey: in.IdempotencyKey}); err != nil {
			return PrepareResult{}, err
		}
	}
	v, err := e.GetSession(ctx, tenant, id)
	if err != nil {
		return PrepareResult{}, err
	}
	u := v.Usage
	st := Status{SessionID: id, Version: v.Version, Usage: u, Time: e.now().UTC()}
	paused := v.AutoPausedBelow > 0 && v.ActiveTokens < v.AutoPausedBelow
	switch {
	case !u.Policy.AutoCompact:
		if u.Over > 0 {
			return PrepareResult{}, fmt.Errorf("auto_compact is off and the request is %d tokens over the usable window (%d of %d); compact, revert, or start a new session from a hand-off: %w",
				u.Over, u.Used, u.ContextWindow-u.ReservedOutput, ErrFailedPrecondition)
		}
		if u.Level >= compaction.LevelCompact {
			st.Warnings = append(st.Warnings, "auto_compact is off: "+u.Recommendation)
		}
	case u.Level >= compaction.LevelCompact && (!paused || u.Over > 0):
		tiers := []compaction.Tier{compaction.TierPrune, compaction.TierDropMiddle}
		if u.Level >= compaction.LevelSummarize {
			tiers = compaction.AllTiers
		}
		res, err := e.Compact(ctx, tenant, id, CompactInput{auto: true, tiers: tiers})
		if err != nil {
			return PrepareResult{}, err
		}
		st.Compacted, st.Usage, st.Version = res.Compacted, res.Usage, res.Version
		st.LastCompaction = res.Compaction
		st.Warnings = append(st.Warnings, res.Warnings...)
	case paused && u.Level >= compaction.LevelCompact:
		st.Warnings = append(st.Warnings, "auto-compaction is paused for this session: the last compaction saved too little")
	}
	if st.Usage.Level == compaction.LevelHandoff {
		st.Warnings = append(st.Warnings, st.Usage.Recommendation)
	}
	msgs, err := e.activeView(ctx, tenant, id)
	if err != nil {
		return PrepareResult{}, err
	}
	if st.LastCompaction == nil && v.CompactionRound > 0 {
		if c, err := e.store.LatestCompaction(ctx, tenant, id); err == nil {
			st.LastCompaction = &c
		}
	}
	return PrepareResult{Messages: msgs, Status: st}, nil
}

// activeView reads the whole active view.
func (e *Engine) activeView(ctx context.Context, tenant, id string) ([]chat.Message, error) {
	var out []chat.Message
	for after := int64(0); ; {
		page, ords, err := e.store.ActiveMessages(ctx, tenant, id, after, 1000)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(page) < 1000 {
			return out, nil
		}
		after = ords[len(ords)-1]
	}
}

// RevertCompaction restores the active view from before a compaction,
// keeping messages appended since. Later compactions must be reverted first.
func (e *Engine) RevertCompaction(ctx context.Context, tenant, id, compactionID string) (SessionView, error) {
	var final store.Session
	err := e.store.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		if err := tx.LockCompaction(ctx, tenant, id); err != nil {
			return err
		}
		s, err := tx.GetSession(ctx, tenant, id)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("session %q: %w", id, store.ErrNotFound)
		}
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
		view, err := tx.ViewMessages(ctx, tenant, id)
		if err != nil {
			return err
		}
		cur := idsOf(view)
		if len(cur) < len(c.ViewAfter) || !equalIDs(cur[:len(c.ViewAfter)], c.ViewAfter) {
			return fmt.Errorf("a later compaction changed the active view; revert it first: %w", ErrFailedPrecondition)
		}
		ids := append(append([]string{}, c.ViewBefore...), cur[len(c.ViewAfter):]...)
		msgs, err := tx.MessagesByID(ctx, tenant, id, ids)
		if err != nil {
			return err
		}
		if err := tx.ReplaceView(ctx, tenant, id, ids); err != nil {
			return err
		}
		if err := tx.MarkReverted(ctx, tenant, id, compactionID, now); err != nil {
			return err
		}
		s.Version++
		s.ViewEpoch++
		s.ActiveTokens, s.ActiveCount, s.ViewSeq = sumTokens(msgs), int64(len(msgs)), int64(len(msgs))
		s.AutoPausedBelow = s.ActiveTokens + 1 // a revert is deliberate: do not re-compact at once
		s.UpdatedAt = now
		final = s
		return tx.UpdateSession(ctx, &s)
	})
	if err != nil {
		return SessionView{}, err
	}
	e.notify(ctx, tenant, id, final.Version, watch.EventReverted)
	return e.view(ctx, final)
}

// SessionStatus is the current status of a session, as watchers get it.
func (e *Engine) SessionStatus(ctx context.Context, tenant, id string) (Status, error) {
	v, err := e.GetSession(ctx, tenant, id)
	if err != nil {
		return Status{}, err
	}
	st := Status{SessionID: id, Version: v.Version, Usage: v.Usage, Time: e.now().UTC()}
	if v.AutoPausedBelow > 0 && v.ActiveTokens < v.AutoPausedBelow {
		st.Warnings = append(st.Warnings, "auto-compaction is paused for this session: the last compaction saved too little")
	}
	if v.CompactionRound > 0 {
		c, err := e.store.LatestCompaction(ctx, tenant, id)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return Status{}, err
		}
		if err == nil {
			st.LastCompaction = &c
		}
	}
	return st, nil
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

// ListCompactions returns a session's compactions, oldest first.
func (e *Engine) ListCompactions(ctx context.Context, tenant, id string) ([]store.Compaction, error) {
	if _, err := e.readSession(ctx, tenant, id); err != nil {
		return nil, err
	}
	return e.store.ListCompactions(ctx, tenant, id)
}

// Expanded is a message and the originals it stands in for.
type Expanded struct {
	Message   chat.Message
	Originals []chat.Message
}

// ExpandMessage returns the originals behind a summary or placeholder (a
// normal message has none: it is its own original).
func (e *Engine) ExpandMessage(ctx context.Context, tenant, id, messageID string) (Expanded, error) {
	if _, err := e.readSession(ctx, tenant, id); err != nil {
		return Expanded{}, err
	}
	msgs, err := e.store.MessagesByID(ctx, tenant, id, []string{messageID})
	if errors.Is(err, store.ErrNotFound) {
		return Expanded{}, fmt.Errorf("message %q: %w", messageID, store.ErrNotFound)
	}
	if err != nil {
		return Expanded{}, err
	}
	out := Expanded{Message: msgs[0]}
	if len(out.Message.Replaces) > 0 {
		if out.Originals, err = e.store.MessagesByID(ctx, tenant, id, out.Message.Replaces); err != nil {
			return Expanded{}, err
		}
	}
	return out, nil
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
	out := Handoff{Document: summarize.Handoff(view)}
	if !in.NewSession {
		return out, nil
	}
	labels := map[string]string{"contextd.handoff_from": id}
	for k, v := range s.Labels {
		labels[k] = v
	}
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
