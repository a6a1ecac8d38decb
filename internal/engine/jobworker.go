package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/store"
)

// RunJobs runs this server's background compaction workers until ctx ends
// (background.go). Each leases one job at a time; a job's work is one
// snapshot read, one plan (the summarizer's call, bounded by its timeout)
// and two short transactions. On return every lease this server held was
// handed back, so another replica takes its jobs at once.
func (e *Engine) RunJobs(ctx context.Context) {
	if e.bg == nil || !e.bg.cfg.Enabled {
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { e.sweep(ctx) }) // also with no workers here
	for range e.bg.cfg.Workers {
		wg.Go(func() { e.work(ctx) })
	}
	wg.Wait()
}

// sweep deletes idle jobs at start and every idleSweep.
func (e *Engine) sweep(ctx context.Context) {
	t := time.NewTicker(idleSweep)
	defer t.Stop()
	for {
		e.sweepIdleJobs(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// idleJobAge is how long a job nobody updated stays (a ready result no
// call applied, a tombstone, or a job no worker took: a live one is
// updated at least every third of its lease); idleSweep is how often they
// are deleted.
const (
	idleJobAge = 24 * time.Hour
	idleSweep  = 10 * time.Minute
)

func (e *Engine) work(ctx context.Context) {
	poll := time.NewTimer(0)
	defer poll.Stop()
	for {
		j, err := e.lease(ctx)
		switch {
		case err == nil:
			e.runJob(ctx, j)
			continue // there may be more
		case !errors.Is(err, store.ErrNotFound) && ctx.Err() == nil:
			e.log.WarnContext(ctx, "background compaction: lease", "err", err)
		}
		poll.Reset(e.bg.cfg.Poll)
		select {
		case <-ctx.Done():
			return
		case <-e.bg.wake:
		case <-poll.C:
		}
	}
}

// sweepIdleJobs deletes results no call applied and tombstones older than
// idleJobAge, a thousand at a time.
func (e *Engine) sweepIdleJobs(ctx context.Context) {
	for {
		var n int
		err := e.store.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
			var err error
			n, err = tx.DeleteIdleJobs(ctx, e.timestamp().Add(-idleJobAge), 1000)
			return err
		})
		if err != nil {
			e.log.WarnContext(ctx, "background compaction: sweep", "err", err)
			return
		}
		if n < 1000 {
			return
		}
	}
}

// lease takes the next job: queued, or running under a lease that lapsed.
// A read probes first, so an idle worker takes no writer. A job past its
// attempts is given up instead: it stays as a tombstone, so the session is
// not scheduled again for this view and its calls compact themselves.
func (e *Engine) lease(ctx context.Context) (store.Job, error) {
	for {
		if due, err := e.store.HasDueJob(ctx, e.timestamp(), e.bg.cfg.Running); err != nil || !due {
			if err == nil {
				err = store.ErrNotFound
			}
			return store.Job{}, err
		}
		var j store.Job
		gaveUp := false
		err := e.store.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
			now := e.timestamp()
			var err error
			if j, err = tx.NextJob(ctx, now, e.bg.cfg.Running); err != nil {
				return err
			}
			if gaveUp = j.Attempts >= jobAttempts; gaveUp {
				j.State, j.Owner, j.UpdatedAt = store.JobFailed, "", now
				return tx.PutJob(ctx, &j)
			}
			j.State, j.Owner, j.LeaseUntil, j.UpdatedAt = store.JobRunning, e.bg.owner+":"+newJobID(), now.Add(e.bg.cfg.Lease), now
			j.Attempts++
			return tx.PutJob(ctx, &j)
		})
		if err != nil || !gaveUp {
			return j, err
		}
		e.metrics.Job("failed")
		e.log.WarnContext(ctx, "background compaction: job given up", "tenant", j.Tenant, "session", j.SessionID, "attempts", j.Attempts)
	}
}

// errNotYet: the session is not yet where the job was scheduled for.
var errNotYet = errors.New("the session is below its warning level")

// errLost: the job is no longer this worker's (its lease lapsed and another
// took it, or the session was rescheduled).
var errLost = errors.New("job lease lost")

// update rewrites this worker's job in a transaction, if it still holds it.
func (e *Engine) update(ctx context.Context, j store.Job, change func(*store.Job) (remove bool)) error {
	return e.store.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		cur, err := tx.GetJob(ctx, j.Tenant, j.SessionID)
		if errors.Is(err, store.ErrNotFound) {
			return errLost
		}
		if err != nil {
			return err
		}
		if cur.ID != j.ID || cur.Owner != j.Owner || cur.State != store.JobRunning {
			return errLost
		}
		if change(&cur) {
			_, err := tx.DeleteJob(ctx, cur.Tenant, cur.SessionID, cur.ID)
			return err
		}
		cur.UpdatedAt = e.timestamp()
		return tx.PutJob(ctx, &cur)
	})
}

// runJob plans one job and stores its result, renewing the lease while the
// summarizer works. A worker that dies leaves the lease to lapse.
func (e *Engine) runJob(ctx context.Context, j store.Job) {
	e.metrics.JobRunning(1)
	defer e.metrics.JobRunning(-1)
	jctx, cancel := context.WithCancel(ctx)
	defer cancel()
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		t := time.NewTicker(e.bg.cfg.Lease / 3)
		defer t.Stop()
		for {
			select {
			case <-jctx.Done():
				return
			case <-t.C:
				err := e.update(jctx, j, func(cur *store.Job) bool {
					cur.LeaseUntil = e.timestamp().Add(e.bg.cfg.Lease)
					return false
				})
				if err != nil && jctx.Err() == nil {
					cancel() // lost, or the store is failing: stop planning
					return
				}
			}
		}
	}()
	outcome, result, err := e.planJob(jctx, j)
	cancel()
	<-renewed
	// What is left is written even when the server is stopping (a result
	// planned is not thrown away), within a few seconds.
	wctx, done := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer done()
	switch {
	case err != nil && ctx.Err() != nil:
		// Stopping: hand the job back, so another replica takes it now.
		err = e.update(wctx, j, func(cur *store.Job) bool {
			cur.State, cur.Owner, cur.LeaseUntil = store.JobQueued, "", time.Unix(0, 0).UTC()
			cur.Attempts = max(cur.Attempts-1, 0) // not the job's fault
			return false
		})
		outcome = ""
	case err != nil:
		// Tried again after a pause that grows with the attempts; given up
		// by lease once they are used.
		e.log.WarnContext(ctx, "background compaction: plan", "tenant", j.Tenant, "session", j.SessionID, "attempt", j.Attempts, "err", err)
		err = e.update(wctx, j, func(cur *store.Job) bool {
			cur.State, cur.Owner, cur.LeaseUntil = store.JobQueued, "", time.Unix(0, 0).UTC()
			cur.NotBefore = e.timestamp().Add(time.Duration(cur.Attempts) * 5 * time.Second)
			return false
		})
		outcome = "retried"
	case outcome == "discarded":
		err = e.update(wctx, j, func(*store.Job) bool { return true })
	case outcome == "idle":
		// Nothing to compact for this view: a tombstone, so it is not
		// scheduled again until the view moves on.
		err = e.update(wctx, j, func(cur *store.Job) bool {
			cur.State, cur.Owner = store.JobFailed, ""
			return false
		})
		outcome = ""
	default:
		err = e.update(wctx, j, func(cur *store.Job) bool {
			cur.State, cur.Result, cur.Owner, cur.Attempts = store.JobReady, result, "", 0
			return false
		})
	}
	switch {
	case errors.Is(err, errLost):
		return // whoever took, replaced or deleted the job counted it
	case err != nil:
		e.log.WarnContext(ctx, "background compaction: store", "tenant", j.Tenant, "session", j.SessionID, "err", err)
		return
	case outcome != "":
		e.metrics.Job(outcome)
	}
}

// planJob plans the compaction of a job's session as it is now: "ready"
// with the encoded result, or "discarded" when the session moved past the
// job (another view, model or policy, deleted, or nothing to compact).
func (e *Engine) planJob(ctx context.Context, j store.Job) (string, []byte, error) {
	snap, err := e.snapshot(ctx, j.Tenant, j.SessionID)
	if errors.Is(err, store.ErrNotFound) {
		return "discarded", nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	s := snap.session
	if s.ViewEpoch != j.Epoch || fingerprint(&s) != j.Fingerprint {
		return "discarded", nil, nil // moved on
	}
	if !e.backgroundOn(&s) {
		// This server cannot use the session's LLM (its result would not be
		// the LLM's): tried again, maybe by another.
		return "", nil, fmt.Errorf("the session's summarizer is not an LLM this server can use")
	}
	m, _ := e.models.Lookup(s.Model)
	cal, err := e.calibration(ctx, s.Tenant, m)
	if err != nil {
		return "", nil, err
	}
	v, err := e.viewCached(ctx, s, map[string]*store.Calibration{m.Name: cal})
	if err != nil {
		return "", nil, err
	}
	if v.Usage.Level < compaction.LevelCompact {
		// Below the warning level at the view it was scheduled for: the call
		// that scheduled it may not have committed its append yet. Tried
		// again later (a tombstone after its attempts).
		return "", nil, errNotYet
	}
	// The compaction PrepareContext would run at the summarize level, with
	// every tier. It aims below where that would aim by what the session
	// will have grown by then (to its critical level, where a summary is
	// first applied), at most halfway down: applied later, the result plus
	// the messages appended meanwhile then stands where a compaction made
	// at that moment would, with as much verbatim after the summary.
	in := cacheAware(CompactInput{tiers: compaction.AllTiers}, v.Usage)
	in.tiers, in.payback, in.background = compaction.AllTiers, 0, true
	u := v.Usage
	if usable := float64(u.ContextWindow - u.ReservedOutput); usable > 0 {
		to := aim(in, u)
		ahead := max(u.Policy.CriticalThreshold-float64(u.Used)/usable, 0)
		deeper := max(to-ahead, to/2)
		in.Target = &deeper
	}
	start := time.Now()
	p, err := e.plan(ctx, snap, in)
	if err != nil {
		return "", nil, err
	}
	if p.plan.SummaryFailed != nil {
		return "", nil, fmt.Errorf("summarizer: %w", p.plan.SummaryFailed)
	}
	if !p.plan.Changed() {
		return "idle", nil, nil
	}
	enc, err := encodeJobResult(p, snap.view, time.Since(start))
	return "ready", enc, err
}
