package engine

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/tokens"
)

// Background compaction (docs/compaction.md, "Background compaction").
//
// When PrepareContext leaves a session at or above its warning level and
// the session summarizes with an LLM, the session's next compaction is
// scheduled as a job row in the store (one per session). A worker of any
// replica leases it (jobworker.go), plans it on the session as it then is,
// with the LLM, outside any transaction, and stores the prepared result.
// When a later PrepareContext has to compact, it applies that result
// instead of planning, if the view has only grown since (the prepared
// summary replaces the same originals; what was appended after stays),
// in the same transaction as its append, deleting the job: a result is
// applied at most once, and only to the incarnation, view epoch, model,
// policy, system prompt, tools and gateway label it was planned for. A
// revert, clear, compaction or edit moves the epoch; a model, policy,
// prompt, tools or gateway label change moves the fingerprint; a deleted
// session is not found.
//
// While a job is preparing and the request fits below the emergency
// threshold, PrepareContext does not wait for an LLM: it appends and says
// so. When it must compact at once and no result is ready, it plans itself,
// with the extractive summarizer when the call's deadline leaves no time
// for the LLM.

// Background configures background compaction.
type Background struct {
	// Enabled schedules jobs and applies their results.
	Enabled bool
	// Workers is how many jobs this server runs at once (0: none here;
	// other replicas may run them).
	Workers int
	// Lease is how long a worker holds a job without renewing it (renewed
	// every third of it while it runs); a crashed worker's job is leased
	// again once it lapses.
	Lease time.Duration
	// Queue bounds the jobs queued or running in the store, and PerTenant
	// those of one tenant; a session that would go past either is not
	// scheduled (it compacts in the call, as without background jobs).
	Queue     int
	PerTenant int
	// Running is how many jobs of one tenant run at once, over all
	// replicas (fairness: one tenant's burst does not hold every worker).
	Running int
	// Poll is how often an idle worker looks for jobs scheduled by other
	// replicas (its own wake it at once).
	Poll time.Duration
}

// DefaultBackground is background compaction as the server runs it unless
// configured otherwise.
var DefaultBackground = Background{Enabled: true, Workers: 8, Lease: 30 * time.Second, Queue: 1000, PerTenant: 50,
	Running: 4, Poll: time.Second}

// WithBackground sets background compaction.
func WithBackground(b Background) Option { return func(e *Engine) { e.bg = newBackgroundState(b) } }

// jobAttempts is how many leases a job gets before it is given up (the
// session then compacts in the call).
const jobAttempts = 3

// backgroundState is the engine's side of background jobs.
type backgroundState struct {
	cfg   Background
	owner string        // this server's name in leases
	wake  chan struct{} // pokes an idle worker
	// refused remembers, for a few seconds, the sessions the queue refused,
	// so a full queue does not cost every call a write (bounded: cleared
	// when full).
	mu      sync.Mutex
	refused map[string]time.Time
}

// refusedFor is how long a session the queue refused is not tried again.
const refusedFor = 5 * time.Second

func newBackgroundState(b Background) *backgroundState {
	d := DefaultBackground
	if b.Lease <= 0 {
		b.Lease = d.Lease
	}
	if b.Poll <= 0 {
		b.Poll = d.Poll
	}
	if b.Queue <= 0 {
		b.Queue = d.Queue
	}
	if b.PerTenant <= 0 {
		b.PerTenant = d.PerTenant
	}
	if b.Running <= 0 {
		b.Running = d.Running
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	return &backgroundState{cfg: b, owner: hex.EncodeToString(id[:]), wake: make(chan struct{}, 1),
		refused: map[string]time.Time{}}
}

// backgroundOn reports whether s's compactions are prepared in the
// background: the server does it and the session summarizes with an LLM.
func (e *Engine) backgroundOn(s *store.Session) bool {
	if e.bg == nil || !e.bg.cfg.Enabled {
		return false
	}
	spec := ""
	if s.Policy.Summarizer != nil {
		spec = *s.Policy.Summarizer
	}
	_, isLLM, err := e.summarizers.Resolve(spec)
	return err == nil && isLLM
}

// fingerprint digests what a plan of s depends on besides its view. The
// gateway label is in it (the wording of what the plan writes,
// callsNoRPC) only when set, so an API session's fingerprint is the one it
// had before the label counted.
func fingerprint(s *store.Session) string {
	pol, _ := store.EncodePolicy(s.Policy)
	h := sha256.New()
	parts := []string{s.Model, pol, strconv.FormatInt(s.SystemTokens, 10), strconv.FormatInt(s.ToolsTokens, 10),
		strconv.FormatInt(s.CreatedAt.UnixNano(), 10), strconv.Itoa(s.CompactionRound)}
	if callsNoRPC(*s) {
		parts = append(parts, GatewayLabel)
	}
	for _, part := range parts {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

func idsDigest(ids []string) string {
	h := sha256.New()
	for _, id := range ids {
		h.Write([]byte(id))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// jobResult is a prepared compaction as a job stores it: the plan without
// the messages it keeps (those are in the view it was planned on, which
// must still open the session's view when it is applied).
type jobResult struct {
	Round        int                      `json:"round"`
	Prefix       int                      `json:"prefix"`        // messages of the view planned on
	PrefixDigest string                   `json:"prefix_digest"` // of their ids
	ViewAfter    []string                 `json:"view_after"`
	New          []chat.Message           `json:"new"`
	Items        []compaction.Replacement `json:"items"`
	Tiers        []compaction.Tier        `json:"tiers"`
	TokensBefore int64                    `json:"tokens_before"`
	TokensAfter  int64                    `json:"tokens_after"`
	Summary      string                   `json:"summary,omitempty"`
	Warnings     []string                 `json:"warnings,omitempty"`
	// Took is how long planning took: what a call applying it did not wait.
	Took time.Duration `json:"took"`
}

func encodeJobResult(p planned, view []chat.Message, took time.Duration) ([]byte, error) {
	r := jobResult{Round: p.record.Round, Prefix: len(view), PrefixDigest: idsDigest(idsOf(view)),
		ViewAfter: idsOf(p.plan.View), New: p.plan.New, Items: p.plan.Items, Tiers: p.plan.Tiers,
		TokensBefore: p.plan.TokensBefore, TokensAfter: p.plan.TokensAfter, Summary: p.plan.Summary,
		Warnings: p.result.Warnings, Took: took}
	return json.Marshal(r)
}

// readyJob is a job's result made a plan again for a view.
type readyJob struct {
	job     store.Job
	p       planned
	prefix  int
	took    time.Duration
	summary bool // its plan summarizes
}

// errUnusable: a ready job's result does not fit the view it would apply to.
var errUnusable = errors.New("prepared compaction does not fit the view")

// usable rebuilds a ready job's plan on view (the session's view as the
// call would leave it), or says why it cannot be applied there.
func (e *Engine) usable(j store.Job, s *store.Session, view []chat.Message, m tokens.Model, policy compaction.Policy) (readyJob, error) {
	if len(j.Result) == 0 || j.Epoch != s.ViewEpoch || j.Fingerprint != fingerprint(s) {
		return readyJob{}, errUnusable
	}
	var r jobResult
	if err := json.Unmarshal(j.Result, &r); err != nil {
		return readyJob{}, fmt.Errorf("%w: %v", errUnusable, err)
	}
	if r.Round != s.CompactionRound+1 || r.Prefix > len(view) || idsDigest(idsOf(view[:r.Prefix])) != r.PrefixDigest {
		return readyJob{}, errUnusable
	}
	fresh := make(map[string]*chat.Message, len(r.New))
	for i := range r.New {
		fresh[r.New[i].ID] = &r.New[i]
	}
	kept := make(map[string]*chat.Message, r.Prefix)
	for i := range view[:r.Prefix] {
		kept[view[i].ID] = &view[i]
	}
	plan := &compaction.Plan{New: r.New, Items: r.Items, Tiers: r.Tiers, TokensBefore: r.TokensBefore,
		TokensAfter: r.TokensAfter, Summary: r.Summary, View: make([]chat.Message, 0, len(r.ViewAfter))}
	for _, id := range r.ViewAfter {
		switch {
		case fresh[id] != nil:
			plan.View = append(plan.View, *fresh[id])
		case kept[id] != nil:
			plan.View = append(plan.View, *kept[id])
		default:
			return readyJob{}, errUnusable
		}
	}
	p := planned{plan: plan, model: m, policy: policy}
	p.record = e.compactionRecord(plan, r.Round, view[:r.Prefix])
	p.result.Compaction = p.record
	p.result.Warnings = r.Warnings
	return readyJob{job: j, p: p, prefix: r.Prefix, took: r.Took, summary: slices.Contains(r.Tiers, compaction.TierSummarize)}, nil
}

// fitsAfter reports whether applying rj leaves the view (with what was
// appended after its plan) halfway at most from where compactions aim
// (target) to the warning level; when the call must compact at once
// (forced), below the emergency level. A result that has aged more is
// planned again: a shallow compaction brings the next one (and its
// prompt-cache rewrite, on every call's bill) closer, which costs more
// than the summarizer's call.
func (rj *readyJob) fitsAfter(view []chat.Message, u Usage, target float64, forced bool) bool {
	after := rj.p.plan.TokensAfter + sumTokens(view[rj.prefix:])
	usable := float64(u.ContextWindow - u.ReservedOutput)
	if usable <= 0 {
		return false
	}
	limit := (target + u.Policy.WarningThreshold) / 2
	if forced {
		limit = u.Policy.EmergencyThreshold
	}
	return float64(after)/usable < limit
}

// schedule makes sure s has a job for its current view, and reports
// whether one is queued, running or ready for it (false: the queue refused
// it, a tombstone says the session's calls compact themselves, or the
// session moved on). A job of an older view or another fingerprint is
// replaced; a newer one never is: the session is read, locked, in the
// transaction, before its job (the order PrepareContext locks them in).
// Errors are logged: a call that schedules may have committed.
func (e *Engine) schedule(ctx context.Context, s *store.Session) bool {
	if !e.backgroundOn(s) {
		return false
	}
	fp := fingerprint(s)
	j, err := e.store.GetJob(ctx, s.Tenant, s.ID) // a read first: usually the job is there
	switch {
	case err == nil && j.Epoch == s.ViewEpoch && j.Fingerprint == fp:
		return j.State != store.JobFailed
	case err == nil && j.Epoch > s.ViewEpoch:
		return false // a newer view's
	}
	key := s.Tenant + "\x00" + s.ID
	now := e.timestamp()
	e.bg.mu.Lock()
	until, refused := e.bg.refused[key]
	e.bg.mu.Unlock()
	if refused && now.Before(until) {
		return false
	}
	var outcome string
	err = e.store.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		outcome = ""
		cur, err := lockedSession(ctx, tx, s.Tenant, s.ID)
		if err != nil {
			return err
		}
		if cur.ViewEpoch != s.ViewEpoch || fingerprint(&cur) != fp {
			outcome = "moved" // its next call schedules for the view it has
			return nil
		}
		j, err := tx.GetJob(ctx, s.Tenant, s.ID)
		switch {
		case err == nil && j.Epoch == s.ViewEpoch && j.Fingerprint == fp:
			outcome = string(j.State) // scheduled meanwhile
			return nil
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return err
		}
		stale := err == nil && j.State != store.JobFailed // a live job of another view (its discard is counted)
		mine, all, err := tx.CountJobs(ctx, s.Tenant)
		if err != nil {
			return err
		}
		if all >= e.bg.cfg.Queue || mine >= e.bg.cfg.PerTenant {
			outcome = "refused"
			return nil
		}
		outcome = "queued"
		if stale {
			outcome = "replaced"
		}
		return tx.PutJob(ctx, &store.Job{Tenant: s.Tenant, SessionID: s.ID, ID: newJobID(), State: store.JobQueued,
			Epoch: s.ViewEpoch, Fingerprint: fp, CreatedAt: now, UpdatedAt: now, LeaseUntil: time.Unix(0, 0).UTC(),
			NotBefore: time.Unix(0, 0).UTC()})
	})
	if err != nil {
		e.log.WarnContext(ctx, "background compaction: schedule", "tenant", s.Tenant, "session", s.ID, "err", err)
		return false
	}
	switch outcome {
	case "refused":
		e.metrics.Job("refused")
		e.bg.mu.Lock()
		if len(e.bg.refused) >= 10_000 {
			clear(e.bg.refused)
		}
		e.bg.refused[key] = now.Add(refusedFor)
		e.bg.mu.Unlock()
		return false
	case "replaced", "queued":
		if outcome == "replaced" {
			e.metrics.Job("discarded")
		}
		e.metrics.Job("queued")
		e.wakeWorker()
		return true
	}
	return outcome == string(store.JobQueued) || outcome == string(store.JobRunning) || outcome == string(store.JobReady)
}

// requeue queues a session's ready job again, keeping its aged result
// until a fresher one replaces it, if the job is still that one for this
// view and the queue has room; it reports whether the job is now queued
// (or running: another call did it).
func (e *Engine) requeue(ctx context.Context, s *store.Session, jobID string) bool {
	fp := fingerprint(s)
	queued := false
	err := e.store.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		queued = false
		if _, err := lockedSession(ctx, tx, s.Tenant, s.ID); err != nil {
			return err
		}
		j, err := tx.GetJob(ctx, s.Tenant, s.ID)
		if err != nil || j.ID != jobID || j.Epoch != s.ViewEpoch || j.Fingerprint != fp {
			return ignoreNotFound(err)
		}
		if j.State == store.JobQueued || j.State == store.JobRunning {
			queued = true
			return nil
		}
		if j.State != store.JobReady {
			return nil
		}
		mine, all, err := tx.CountJobs(ctx, s.Tenant)
		if err != nil || all >= e.bg.cfg.Queue || mine >= e.bg.cfg.PerTenant {
			return err // full: the aged result stays as it is, and the call plans
		}
		j.State, j.Owner, j.LeaseUntil, j.UpdatedAt = store.JobQueued, "", time.Unix(0, 0).UTC(), e.timestamp()
		queued = true
		return tx.PutJob(ctx, &j)
	})
	if err != nil {
		e.log.WarnContext(ctx, "background compaction: queue again", "tenant", s.Tenant, "session", s.ID, "err", err)
		return false
	}
	if queued {
		e.metrics.Job("refreshed")
		e.wakeWorker()
	}
	return queued
}

// wakeWorker pokes an idle worker of this server.
func (e *Engine) wakeWorker() {
	if e.bg != nil {
		select {
		case e.bg.wake <- struct{}{}:
		default:
		}
	}
}

func newJobID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "job_" + hex.EncodeToString(b[:])
}

// llmLatency keeps the recent durations of each tenant's LLM summarizers
// on this server, for the deadline decision (llmFits).
type llmLatency struct {
	mu   sync.Mutex
	last map[string][]llmSample // at most 16 each; cleared at 1,024 keys
}

type llmSample struct {
	took time.Duration
	at   time.Time
}

// llmSampleAge is how long an attempt's duration counts: after it, a call
// whose deadline allowed no LLM summary tries one again.
const llmSampleAge = 5 * time.Minute

// observeLLM records how long an LLM summary attempt of a tenant took.
func (e *Engine) observeLLM(tenant, name string, took time.Duration) {
	l := &e.latency
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil || len(l.last) >= 1024 {
		l.last = map[string][]llmSample{}
	}
	key := tenant + "\x00" + name
	d := append(l.last[key], llmSample{took: took, at: time.Now()})
	if len(d) > 16 {
		d = d[len(d)-16:]
	}
	l.last[key] = d
}

// llmFits reports whether the call's deadline leaves time for an LLM
// summary, judged by the slowest of the tenant's last 16 attempts with the
// summarizer on this server in the last 5 minutes (none: it is tried). No
// deadline: it fits.
func (e *Engine) llmFits(ctx context.Context, tenant, name string) (bool, time.Duration) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return true, 0
	}
	l := &e.latency
	l.mu.Lock()
	var slowest time.Duration
	for _, d := range l.last[tenant+"\x00"+name] {
		if time.Since(d.at) < llmSampleAge {
			slowest = max(slowest, d.took)
		}
	}
	l.mu.Unlock()
	need := slowest + slowest/4 + 100*time.Millisecond
	return slowest == 0 || time.Until(deadline) > need, slowest
}
