package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/store"
)

// compactionChoice is how PrepareContext compacts the would-be view: with
// a plan of its own, with a background job's prepared result, or not now.
type compactionChoice struct {
	p planned
	// deferred: the plan is not applied (cache-aware deferral, or waiting
	// for a background job).
	deferred bool
	waiting  bool
	// ready, when set, is the job whose result p is; prefix is how much of
	// the view it was planned on.
	ready  *readyJob
	prefix int
	// stale is the id of a job the write discards (planned for a view or
	// session the call does not have).
	stale string
	// staleLive: the stale job was not a tombstone (its discard is counted).
	staleLive bool
	warnings  []string
	// summaryAhead: pruning alone does not bring the view to its target,
	// so the next compaction will summarize (worth preparing now).
	summaryAhead bool
}

// chooseCompaction decides how PrepareContext compacts snap, which the
// policy says to compact with cin (see background.go):
//
//  1. A background job's result that fits the view is applied (no plan).
//  2. Else a plan is made with the extractive summarizer first when it only
//     estimates (cache-aware payback), when an LLM summary may be prepared
//     in the background, or when the call's deadline leaves no time for
//     the LLM; a plan that does not summarize is the same with any
//     summarizer and is the plan.
//  3. A plan that needs an LLM summary waits for the background while the
//     request fits below the emergency threshold; from there on it is made
//     in the call, with the LLM if the deadline allows.
func (e *Engine) chooseCompaction(ctx context.Context, snap snapshot, cin CompactInput, u Usage) (compactionChoice, error) {
	var c compactionChoice
	s := &snap.session
	forced := u.Over > 0 || u.Level >= compaction.LevelHandoff
	bg := e.backgroundOn(s)
	var job *store.Job
	if bg {
		j, err := e.store.GetJob(ctx, s.Tenant, s.ID)
		switch {
		case err == nil:
			job = &j
		case !errors.Is(err, store.ErrNotFound):
			// The job is an optimization: without it the call plans itself.
			e.log.WarnContext(ctx, "background compaction: read job", "tenant", s.Tenant, "session", s.ID, "err", err)
			bg = false
		}
	}
	// ofThisView: the job was scheduled for the view and session the call has.
	ofThisView := job != nil && job.Epoch == s.ViewEpoch && job.Fingerprint == fingerprint(s)
	aged := false
	if job != nil && len(job.Result) > 0 {
		m, _ := e.models.Lookup(s.Model)
		rj, err := e.usable(*job, s, snap.view, m, u.Policy)
		switch {
		case errors.Is(err, errUnusable):
			c.stale, c.staleLive = job.ID, job.State != store.JobFailed // of another view: planned again
		case err != nil:
			return c, err
		case rj.summary && !slices.Contains(cin.tiers, compaction.TierSummarize):
			// It summarizes and this level only prunes: it waits for its level.
		case rj.fitsAfter(snap.view, u, aim(cin, u), false) || forced && rj.fitsAfter(snap.view, u, aim(cin, u), true):
			c.p, c.ready, c.prefix = rj.p, &rj, rj.prefix
			c.deferred = e.deferred(grownBy(rj.p, snap.view[rj.prefix:]), snap, cin)
			return c, nil
		default:
			// Aged: if the call would wait, a fresher plan is asked for, and
			// this one stays for a call that must compact meanwhile.
			aged = true
		}
	} else if job != nil && !ofThisView {
		c.stale, c.staleLive = job.ID, job.State != store.JobFailed // of another view
	}
	// waitable: the session has a job for this view that will yet give a
	// result worth applying (queued or running; ready and waiting for its
	// level; or aged and queued again now, within the queue's bounds). A
	// tombstone is not. Asked at most once (it may write).
	var asked, wait bool
	waitable := func() bool {
		if asked {
			return wait
		}
		asked = true
		switch {
		case !ofThisView || c.stale != "":
		case job.State == store.JobQueued || job.State == store.JobRunning:
			wait = true
		case job.State == store.JobReady && !aged:
			wait = true
		case job.State == store.JobReady:
			wait = e.requeue(ctx, s, job.ID)
		}
		return wait
	}
	name := u.Policy.Summarizer
	if name == "" {
		name = e.summarizers.Default
	}
	llmOK, slowest := e.llmFits(ctx, s.Tenant, name)
	est := cin
	est.estimate = cin.payback > 0 || bg || !llmOK
	p, err := e.plan(ctx, snap, est)
	if err != nil {
		return c, err
	}
	c.p, c.prefix = p, len(snap.view)
	summarizes := slices.Contains(p.plan.Tiers, compaction.TierSummarize)
	c.summaryAhead = summarizes || !reachesTarget(p, cin, u)
	if bg && !forced && c.summaryAhead && !summarizes && !slices.Contains(cin.tiers, compaction.TierSummarize) && waitable() {
		// A prune that would not reach the target would only discard the
		// compaction being prepared (which prunes too): it waits for it.
		c.deferred, c.waiting = true, true
		c.warnings = append(c.warnings, "pruning alone would not reach the target: the compaction prepared in the background (which prunes and summarizes) is applied from the critical level on")
		return c, nil
	}
	if c.deferred = p.plan.Changed() && e.deferred(p, snap, cin); c.deferred || !p.estimated {
		return c, nil
	}
	if !slices.Contains(p.plan.Tiers, compaction.TierSummarize) {
		c.p.estimated = false // the summarizer was not asked: any would give this plan
		return c, nil
	}
	// Wait only for a job that exists: one for this view, or one scheduled
	// now (a tombstone, a full queue or a failed write: the call plans).
	switch {
	case bg && !forced && (waitable() || (job == nil || c.stale != "") && e.schedule(ctx, s)):
		c.deferred, c.waiting = true, true
		c.warnings = append(c.warnings, "compaction is being prepared in the background (an LLM summary is not awaited in the call); it is applied by a later call, and in the call from the emergency threshold on")
		return c, nil
	case !llmOK:
		c.p.estimated = false
		c.warnings = append(c.warnings, fmt.Sprintf("the call's deadline leaves no time for the LLM summarizer %s (its recent summaries took up to %s here): the extractive summary was used",
			name, slowest.Round(1e6)))
		return c, nil
	}
	// It runs: plan it for real. Under a deadline the LLM gets all but a
	// reserve of it, so that its extractive fallback and the write still fit
	// when it is cut short.
	pctx := ctx
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		pctx, cancel = context.WithDeadline(ctx, deadline.Add(-max(100*time.Millisecond, time.Until(deadline)/4)))
		defer cancel()
	}
	if c.p, err = e.plan(pctx, snap, cin); err != nil {
		return c, err
	}
	return c, nil
}

// grownBy is a prepared plan as it applies to the view it was planned on
// grown by appended: the appended messages follow its view, so that a
// cache-aware payback counts them among what the compaction rewrites.
func grownBy(p planned, appended []chat.Message) planned {
	plan := *p.plan
	plan.View = append(slices.Clip(p.plan.View), appended...)
	grown := sumTokens(appended)
	plan.TokensBefore += grown
	plan.TokensAfter += grown
	p.plan = &plan
	return p
}

// aim is where a compaction with cin aims, as a fraction of the usable
// window.
func aim(cin CompactInput, u Usage) float64 {
	if cin.Target != nil {
		return *cin.Target
	}
	return u.Policy.Target
}

// reachesTarget reports whether a plan brings the view down to where the
// compaction aims (within 5 % of the usable window).
func reachesTarget(p planned, cin CompactInput, u Usage) bool {
	usable := float64(u.ContextWindow - u.ReservedOutput)
	return p.plan.Changed() && float64(p.plan.TokensAfter) <= (aim(cin, u)+0.05)*usable
}

func (e *Engine) settleJob(ctx context.Context, tx store.Tx, s *store.Session, c compactionChoice, deferred bool) (discarded bool, err error) {
	applying := !deferred && c.p.plan.Changed()
	if c.ready != nil && applying {
		j, err := tx.GetJob(ctx, s.Tenant, s.ID)
		if errors.Is(err, store.ErrNotFound) || (err == nil && (j.ID != c.ready.job.ID || !bytes.Equal(j.Result, c.ready.job.Result))) {
			return false, errStale // applied by another call, or replaced by a fresher result: decide again
		}
		if err != nil {
			return false, err
		}
		_, err = tx.DeleteJob(ctx, s.Tenant, s.ID, j.ID)
		return false, err
	}
	if c.stale == "" && (!applying || !e.backgroundOn(s)) {
		return false, nil
	}
	id := c.stale
	if applying {
		id = "" // any: the view it was for is gone
	}
	gone, err := tx.DeleteJob(ctx, s.Tenant, s.ID, id)
	return gone && (applying || c.staleLive), err
}

func ignoreNotFound(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}
