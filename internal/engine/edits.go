package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/tokens"
	"github.com/contextd/contextd/internal/watch"
)

// Fields an UpdateSession mask can name.
const (
	FieldModel        = "model"
	FieldSystemPrompt = "system_prompt"
	FieldTools        = "tools"
	FieldPolicy       = "policy"
	FieldLabels       = "labels"
)

// SessionUpdate is an UpdateSession request: the fields named in Mask take
// the values given here; the others stay.
type SessionUpdate struct {
	Mask            []string
	Model           string
	System          string
	Tools           []chat.Tool
	Policy          compaction.Overrides
	Labels          map[string]string
	ExpectedVersion *int64
}

// UpdateSession changes a session's model, system prompt, tools, policy or
// labels, validated as CreateSession validates them. The system prompt and
// tools are recounted for the (new) model; when the model's encoding or
// framing changes, the messages of the active view are recounted too (their
// stored counts are rewritten) and the view epoch moves, since the view's
// messages changed. The version is bumped and watchers get
// STATUS_EVENT_UPDATED. Work: one count of the system prompt and tools, plus
// one of the active view when the encoding changes, in chunks each within
// the count limits (admitCount).
func (e *Engine) UpdateSession(ctx context.Context, tenant, id string, in SessionUpdate) (SessionView, error) {
	if len(in.Mask) == 0 {
		return SessionView{}, chat.Invalid("update_mask", "must name at least one of model, system_prompt, tools, policy, labels")
	}
	set := map[string]bool{}
	for i, f := range in.Mask {
		switch f {
		case FieldModel, FieldSystemPrompt, FieldTools, FieldPolicy, FieldLabels:
			set[f] = true
		default:
			return SessionView{}, chat.Invalid(fmt.Sprintf("update_mask.paths[%d]", i), "%q is not a field UpdateSession changes (model, system_prompt, tools, policy, labels)", f)
		}
	}
	if set[FieldModel] && in.Model == "" {
		return SessionView{}, chat.Invalid("model", "must not be empty")
	}
	if set[FieldTools] {
		if err := chat.ValidateTools("tools", in.Tools); err != nil {
			return SessionView{}, err
		}
	}
	if set[FieldPolicy] && in.Policy.Summarizer != nil {
		if _, _, err := e.summarizers.Resolve(*in.Policy.Summarizer); err != nil {
			return SessionView{}, chat.Invalid("policy.summarizer", "%v", err)
		}
	}
	for attempt := 0; ; attempt++ {
		v, err := e.updateOnce(ctx, tenant, id, in, set)
		if errors.Is(err, errStale) && attempt < 3 {
			continue // the session changed between counting and writing
		}
		if errors.Is(err, errStale) {
			return SessionView{}, fmt.Errorf("session %q kept changing during the update; retry: %w", id, store.ErrVersionConflict)
		}
		return v, err
	}
}

// updateOnce counts for the session as read now and writes if the session
// is still at that version (errStale otherwise).
func (e *Engine) updateOnce(ctx context.Context, tenant, id string, in SessionUpdate, set map[string]bool) (SessionView, error) {
	cur, err := e.readSession(ctx, tenant, id)
	if err != nil {
		return SessionView{}, err
	}
	if err := checkVersion(id, cur.Version, in.ExpectedVersion); err != nil {
		return SessionView{}, err
	}
	next := cur
	if set[FieldModel] {
		next.Model = in.Model
	}
	if set[FieldSystemPrompt] {
		next.SystemPrompt = in.System
	}
	if set[FieldTools] {
		next.Tools = in.Tools
	}
	if set[FieldPolicy] {
		next.Policy = in.Policy
	}
	if set[FieldLabels] {
		next.Labels = in.Labels
	}
	m, _, enc, err := e.modelFor(next.Model)
	if err != nil {
		return SessionView{}, err
	}
	oldM, _, oldEnc, err := e.modelFor(cur.Model)
	if err != nil {
		return SessionView{}, err
	}
	if set[FieldPolicy] || set[FieldModel] {
		if _, err := compaction.Resolve("policy", next.Policy, m.ContextWindow); err != nil {
			return SessionView{}, err
		}
	}
	if err := checkExpandToolName(next.Tools, next.Policy); err != nil {
		return SessionView{}, err
	}
	fr := tokens.FramingOf(m)
	tools := effectiveTools(next.Tools, next.Policy)
	release, err := e.admitCount(ctx, fr, "", next.SystemPrompt, tools, nil)
	if err != nil {
		return SessionView{}, err
	}
	defer release() // also on a panic; released early below (once)
	next.ToolsTokens, _ = tokens.CountTools(enc, fr, next.SystemPrompt, tools)
	next.SystemTokens = tokens.CountSystem(enc, fr, next.SystemPrompt)
	release()
	// The messages' counts depend on the encoding and the framing only.
	var recounted []chat.Message
	if enc.Name() != oldEnc.Name() || fr != tokens.FramingOf(oldM) {
		view, err := e.activeView(ctx, tenant, id)
		if err != nil {
			return SessionView{}, err
		}
		if recounted, err = e.recount(ctx, next.Model, view); err != nil {
			return SessionView{}, err
		}
	}
	var final store.Session
	err = e.store.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		s, err := lockForEdit(ctx, tx, tenant, id, in.ExpectedVersion)
		if err != nil {
			return err
		}
		if s.Version != cur.Version {
			return errStale
		}
		s.Model, s.SystemPrompt, s.Tools, s.Policy, s.Labels = next.Model, next.SystemPrompt, next.Tools, next.Policy, next.Labels
		s.SystemTokens, s.ToolsTokens = next.SystemTokens, next.ToolsTokens
		if recounted != nil {
			counts := make(map[string]int64, len(recounted))
			for _, m := range recounted {
				counts[m.ID] = m.Tokens
			}
			if len(recounted) > 0 {
				if err := tx.SetMessageTokens(ctx, tenant, id, counts, recounted[0].CountedFor); err != nil {
					return err
				}
			}
			s.ActiveTokens = sumTokens(recounted)
			s.ViewEpoch++ // the view's messages changed (their counts)
		}
		if set[FieldModel] || set[FieldSystemPrompt] || set[FieldTools] || exposesExpandTool(cur.Policy) != exposesExpandTool(next.Policy) {
			s.AnchorInput = 0 // the provider's count was for another request
		}
		if s.AutoPausedBelow > 0 && recounted != nil {
			s.AutoPausedBelow = 0
		}
		s.Version++
		s.UpdatedAt = e.timestamp()
		final = s
		return tx.UpdateSession(ctx, &s)
	})
	if err != nil {
		return SessionView{}, err
	}
	e.notify(ctx, tenant, id, final.Version, watch.EventUpdated)
	return e.view(ctx, final)
}

// recount counts a whole active view for model in chunks that each pass
// the count limits (every message passed them when it was appended), so a
// view longer than one request may hold can still change model.
func (e *Engine) recount(ctx context.Context, model string, view []chat.Message) ([]chat.Message, error) {
	out := make([]chat.Message, 0, len(view))
	max := e.limits.MaxCountBytes
	for start := 0; start < len(view); {
		end, n := start, 0
		for end < len(view) {
			b := textBytes("", "", nil, view[end:end+1])
			if end > start && max > 0 && n+b > max {
				break
			}
			n += b
			end++
		}
		counted, err := e.countMessages(ctx, model, view[start:end])
		if err != nil {
			return nil, err
		}
		out = append(out, counted...)
		start = end
	}
	return out, nil
}

// ClearTier names the record of a ClearMessages.
const ClearTier = "clear"

// ClearResult is what ClearMessages did.
type ClearResult struct {
	Session SessionView
	// Compaction is the record (nil when the view was already as asked).
	Compaction *store.Compaction
}

// ClearMessages starts the active view afresh: empty, or only the original
// task (originalTask: the first human-authored user message) when keepTask. The log
// keeps everything; the change is recorded as a compaction of tier "clear",
// so RevertCompaction restores the exact previous view. Work: one read of
// the active view.
//
// The view is read before the transaction (viewrewrite.go): the
// transaction reads only what was appended since, writes the record and at
// most the kept message's entry, and the cleared rows are swept after it.
func (e *Engine) ClearMessages(ctx context.Context, tenant, id string, keepTask bool, expected *int64) (ClearResult, error) {
	for attempt := 1; ; attempt++ {
		res, err := e.clearOnce(ctx, tenant, id, keepTask, expected)
		if !errors.Is(err, errViewMoved) || attempt == rewriteAttempts {
			return res, err
		}
	}
}

func (e *Engine) clearOnce(ctx context.Context, tenant, id string, keepTask bool, expected *int64) (ClearResult, error) {
	read, readView, err := e.readView(ctx, tenant, id)
	if err != nil {
		return ClearResult{}, err
	}
	var final store.Session
	var rec *store.Compaction
	err = e.store.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		s, err := lockForEdit(ctx, tx, tenant, id, expected)
		if err != nil {
			return err
		}
		final = s
		extra, err := e.grownSince(ctx, &s, &read)
		if err != nil {
			return err
		}
		view := append(readView[:len(readView):len(readView)], extra...)
		// Calls still open would stay open across the clear, and their
		// results, appended next, would follow the task instead of their
		// call: [user(task), tool(c1)], which providers reject. They are
		// closed first, as the next turn would close them (interrupted
		// results at the end of the view), so the view before the clear,
		// which a revert restores, is a valid one too.
		closed, err := e.closeOpenCalls(ctx, tx, &s)
		if err != nil {
			return err
		}
		view = append(view, closed...)
		if len(closed) > 0 {
			final = s
		}
		var kept []chat.Message
		if task := originalTask(view); keepTask && task != "" {
			for _, m := range view {
				if m.ID == task {
					kept = append(kept, m)
				}
			}
		}
		if len(kept) == len(view) {
			if len(closed) > 0 {
				return tx.UpdateSession(ctx, &s)
			}
			return nil // nothing to clear
		}
		if err := validEditedView(kept); err != nil {
			return err
		}
		keptIDs := idsOf(kept)
		var cleared []string
		for _, m := range view {
			if len(keptIDs) == 0 || m.ID != keptIDs[0] {
				cleared = append(cleared, m.ID)
			}
		}
		now := e.timestamp()
		round := s.CompactionRound + 1
		before, after := sumTokens(view), sumTokens(kept)
		rec = &store.Compaction{
			ID: fmt.Sprintf("cmp_%d", round), Round: round, Tiers: []string{ClearTier},
			TokensBefore: before, TokensAfter: after,
			Items: []store.CompactionItem{{Tier: ClearTier, Replaced: cleared, Reason: "ClearMessages",
				TokensBefore: before - after}},
			ViewBefore: idsOf(view), ViewAfter: keptIDs, CreatedAt: now, ExpiresAt: now.Add(e.revertWindow),
		}
		if err := tx.ReplaceView(ctx, tenant, id, keptIDs); err != nil {
			return err
		}
		if err := tx.InsertCompaction(ctx, tenant, id, rec); err != nil {
			return err
		}
		s.Version++
		s.ViewEpoch++ // messages left the view
		s.CompactionRound = round
		s.ActiveTokens, s.ActiveCount, s.ViewSeq = after, int64(len(kept)), int64(len(kept))
		s.ActiveBytes = viewBytes(kept)
		s.AutoPausedBelow = 0
		s.UpdatedAt = now
		final = s
		return tx.UpdateSession(ctx, &s)
	})
	if err != nil {
		return ClearResult{}, err
	}
	if rec != nil {
		e.notify(ctx, tenant, id, final.Version, watch.EventCompacted)
		e.sweepViews(ctx, tenant, id)
	}
	v, err := e.view(ctx, final)
	return ClearResult{Session: v, Compaction: rec}, err
}

// closeOpenCalls records an interrupted result, at the end of the log and
// the active view, for every tool call of session s (locked) still without
// a result, and updates s in memory; it returns the results recorded.
func (e *Engine) closeOpenCalls(ctx context.Context, tx store.Tx, s *store.Session) ([]chat.Message, error) {
	open, err := tx.OpenToolCalls(ctx, s.Tenant, s.ID)
	if err != nil || len(open) == 0 {
		return nil, err
	}
	now := e.timestamp()
	st := stagedAppend{}
	for i, c := range open {
		r, err := e.interrupted(s.Model, c.CallID)
		if err != nil {
			return nil, err
		}
		pos := s.LogCount + int64(i) + 1
		r.Position, r.ID, r.Kind, r.CreatedAt = pos, "msg_"+strconv.FormatInt(pos, 10), chat.KindNormal, now
		st.msgs = append(st.msgs, r)
		st.entries = append(st.entries, store.ViewEntry{Ord: s.ViewSeq + int64(i) + 1, MessageID: r.ID})
		c.ResultPosition = pos
		st.calls = append(st.calls, c)
	}
	if err := st.write(ctx, tx, s); err != nil {
		return nil, err
	}
	return st.msgs, nil
}

// validEditedView checks a view an edit (clear, revert) leaves with the
// checks a compaction's view passes that an edit can be held to: every
// tool call answered by the tool messages right after it (the last
// assistant message's may be pending) and every result after its call.
func validEditedView(view []chat.Message) error {
	if err := compaction.ValidatePairs(view); err != nil {
		return fmt.Errorf("the edit would leave a view providers reject (%v); nothing was changed: %w", err, ErrFailedPrecondition)
	}
	if needsRepair(view) && len(danglingCalls(view)) > 0 {
		return fmt.Errorf("the edit would leave a tool call whose result does not follow it; nothing was changed: %w", ErrFailedPrecondition)
	}
	return nil
}

// lockForEdit locks a session against compactions and other writers and
// reads it, refusing (ErrVersionConflict) when expected is set and stale.
func lockForEdit(ctx context.Context, tx store.Tx, tenant, id string, expected *int64) (store.Session, error) {
	if err := tx.LockCompaction(ctx, tenant, id); err != nil {
		return store.Session{}, err
	}
	s, err := tx.GetSession(ctx, tenant, id)
	if errors.Is(err, store.ErrNotFound) {
		return s, fmt.Errorf("session %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return s, err
	}
	return s, checkVersion(id, s.Version, expected)
}

// checkVersion refuses a write whose expected version is not the session's.
func checkVersion(id string, version int64, expected *int64) error {
	if expected != nil && *expected != version {
		return fmt.Errorf("session %q is at version %d, not the expected %d: %w", id, version, *expected, store.ErrVersionConflict)
	}
	return nil
}
