package postgres

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/store"
)

// A transaction marked store.ReadAhead{Held: true} (RecordExchange, and
// PrepareContext) may start from the session row this Store's last
// transaction of the session committed, with the session's open tool
// calls at that version (and its cache-hints row, checked apart:
// heldHints), instead of reading them under the lock: the lock goes queued
// (heldGuard), with the writes after it and COMMIT, in one round trip
// where the lock's answer took one of its own. A transaction that fails
// on the held row has its guards answered before its error is (failedOnHeld).
// The guard locks the row only at the held version, incarnation and
// update time; any other (another replica's or process's write, a delete,
// a transaction whose commit's outcome was lost, a commit the server lost
// and another replica's write of its version) fails the transaction on the server
// before any of its writes runs, and fn runs again on the row read under
// the lock (inTx): a stale guess costs a retry, never a write on a row
// other than the one it was computed from. Every change of a session's
// row and tool calls writes the row with a new version (UpdateSession,
// DeleteSession, purge), so the version pins the open calls too.
// docs/performance.md, the seventh pass.

// errHeldStale is the guard's failure: the row is no longer at the held
// version (inTx runs fn again without the held row).
var errHeldStale = errors.New("the session's held row is stale")

// heldGuard locks the session's row at the version and incarnation held,
// and fails (division by zero) when it is not there. The version alone
// does not name a row: a commit the server lost (synchronous_commit off,
// store.Resendable, and a crash or a failover) leaves its version to
// another replica's next write, with other contents; the held row's
// updated_at (every write's own time, to the microsecond) tells them
// apart.
const heldGuard = `SELECT 1 / count(*)::int FROM (SELECT 1 FROM sessions
	WHERE tenant = $1 AND id = $2 AND deleted_at IS NULL AND version = $3 AND created_at = $4 AND updated_at = $5
	FOR UPDATE) held`

// The cache-hints row (prepared_views) may be written without a new
// version of the session (GetCacheHints): a held one is checked by a
// statement of its own after the lock's, whose snapshot is taken once the
// lock is granted. heldHints fails when the row is not the held one,
// heldNoHints when there is one.
const (
	heldHints = `SELECT 1 / (EXISTS (SELECT 1 FROM prepared_views WHERE tenant = $1 AND session_id = $2
	AND fixed = $3 AND message_ids = $4 AND view_token = $5))::int`
	heldNoHints = `SELECT 1 / (NOT EXISTS (SELECT 1 FROM prepared_views WHERE tenant = $1 AND session_id = $2))::int`
)

// Bounds of a Store's held rows: past either it starts over (each row is
// a guess; a missing one costs the round trip it saves). A row over a
// quarter of the bytes is not held, so one session's cannot wipe
// everyone's. The tools text the tools codec keeps (toolsHintOf: a coding
// agent's tens of KB, shared by its sessions) is not counted: a held row
// names it by its digest.
const (
	heldMaxSessions = 4096
	heldMaxBytes    = 16 << 20
	heldMaxRow      = heldMaxBytes / 4
)

type heldKey struct{ tenant, id string }

// heldRow is a session row as a transaction of this Store wrote and
// committed it (UpdateSession's arguments), and the session's open tool
// calls at that version.
type heldRow struct {
	s    store.Session // Tools, Policy and Labels from json, on use
	json store.SessionJSON
	// toolsDigest names the tools when the tools codec keeps their text
	// (toolsHintOf; json.Tools is then empty): taken from it on use, a
	// miss (the codec started over) the lock's read.
	toolsDigest string
	calls       []store.ToolCall
	hints       heldHintsRow
}

// heldHintsRow is the session's cache-hints row as a transaction knows it.
type heldHintsRow struct {
	known, found bool
	view         store.PreparedView
}

// heldRowOverhead is what a held row counts beyond its texts.
const heldRowOverhead = 512

// size counts every text a held row keeps: the open calls' ids are the
// client's, as long as a request allows each.
func (r *heldRow) size() int {
	n := len(r.json.Tools) + len(r.json.Policy) + len(r.json.Labels) + len(r.s.Model) + len(r.s.SystemPrompt) +
		2*(len(r.s.Tenant)+len(r.s.ID)) + len(r.hints.view.Fixed) + len(r.hints.view.ViewToken) + heldRowOverhead
	for _, c := range r.calls {
		n += 48 + len(c.CallID)
	}
	for _, id := range r.hints.view.IDs {
		n += 16 + len(id)
	}
	return n
}

// session is the held row of tenant's session id as a read of it under
// the lock returns it, and its tools' text; ok false when the tools codec
// no longer keeps the text the row names (or the row does not decode).
func (r *heldRow) session(tenant, id string) (_ store.Session, tools string, ok bool) {
	j := r.json
	if r.toolsDigest != "" {
		h := toolsHintOf(tenant, id)
		if h.digest != r.toolsDigest {
			return store.Session{}, "", false
		}
		j.Tools = h.text
	}
	s := r.s
	if j.DecodeInto(&s) != nil {
		return store.Session{}, "", false
	}
	return s, j.Tools, true
}

// heldRows are a Store's held rows.
type heldRows struct {
	mu    sync.Mutex
	m     map[heldKey]*heldRow
	bytes int
	// shared are the sessions whose held row was found stale (a guard
	// failed: another replica or process wrote the session since), until
	// a read of the stored row finds the row held again the stored one:
	// HeldSession offers none of theirs, so a conversation a round-robin
	// balancer sends to each replica in turn is matched by a read, not
	// by a guess that fails its transaction every request. Bounded by
	// heldMaxSessions, starting over past it (a session forgotten costs
	// one failed guess).
	shared map[heldKey]bool
}

// stale records that k's held row was found stale, and drops it.
func (h *heldRows) stale(k heldKey) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.drop(k)
	if h.shared == nil || len(h.shared) >= heldMaxSessions {
		h.shared = map[heldKey]bool{}
	}
	h.shared[k] = true
}

// offered is the held row of k unless k is shared.
func (h *heldRows) offered(k heldKey) *heldRow {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.shared[k] {
		return nil
	}
	return h.m[k]
}

func (h *heldRows) get(k heldKey) *heldRow {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.m[k]
}

func (h *heldRows) put(k heldKey, r *heldRow) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.drop(k)
	n := r.size()
	if n > heldMaxRow {
		return
	}
	if h.m == nil || len(h.m) >= heldMaxSessions || h.bytes+n > heldMaxBytes {
		h.m, h.bytes = map[heldKey]*heldRow{}, 0
	}
	h.m[k], h.bytes = r, h.bytes+n
}

// seen drops the held row of k when a read of the stored row outside a
// transaction (GetSession, FindHistoryAndSession) shows it stale: the
// session gone, or at a newer version or another incarnation or write.
// Otherwise a caller that fails on the stale row before any transaction
// (a plan made on it found moved: engine.planPrepareEdits) would leave
// it for the next, which pays a failed guard to learn it again. A read
// of an older version (a snapshot taken before this Store's commit)
// proves nothing and changes nothing.
func (h *heldRows) seen(k heldKey, row store.Session, err error) {
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	r, ok := h.m[k]
	if !ok {
		return
	}
	if err == nil && row.Version == r.s.Version && row.CreatedAt.Equal(r.s.CreatedAt) && row.UpdatedAt.Equal(r.s.UpdatedAt) {
		delete(h.shared, k) // the held row is the stored one: offered again
		return
	}
	if err == nil && row.Version < r.s.Version {
		return
	}
	h.drop(k)
}

func (h *heldRows) forget(k heldKey) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.drop(k)
}

func (h *heldRows) drop(k heldKey) {
	if r, ok := h.m[k]; ok {
		h.bytes -= r.size()
		delete(h.m, k)
	}
}

// heldTrack is what a transaction knows of the one session it locked, to
// hold its row once it commits: the open tool calls (read ahead, or held,
// and changed by its PutToolCalls) and the row it wrote.
type heldTrack struct {
	key        heldKey
	locked     bool
	callsKnown bool
	calls      []store.ToolCall
	hints      heldHintsRow
	wrote      *heldRow
	// touched are the sessions whose rows the transaction wrote otherwise
	// (another session, an insert, a delete): forgotten when it commits.
	touched []heldKey
	// usedHeld: the lock was the held row's guard; fn may be run again.
	usedHeld bool
	// guarded: guard names the last of the guards queued with the lock
	// (the held row's).
	guarded bool
	// unknownAt is the place in the pipe's queue of the last guard of a
	// ToolCalls guess (knowncalls.go) while unknownQueued and it is queued
	// (not sent before sends reached unknownSends).
	unknownAt, unknownSends int
	unknownQueued           bool
	// guard is the guard's place in the pipe's queue while it is queued
	// (pipe.queued[guard], not sent before sends reached guardSends).
	guard, guardSends int
	// guardFailed: the server answered that the held row was stale;
	// the transaction's error is then errHeldStale, whatever fn made of
	// the error its read answered (inTx).
	guardFailed bool
	// heldStale: the guard that failed was the held row's (not the tool
	// calls' guess, knowncalls.go).
	heldStale bool
}

// lockHeld answers the lock of a session from the held row, the guard
// queued (with the writes after it); ok false when none is held.
func (t *txn) lockHeld(tenant, id string, ra store.ReadAhead) (store.Session, bool) {
	k := heldKey{tenant, id}
	r := t.rows.get(k)
	if r == nil || (ra.PreparedView && !r.hints.known) {
		return store.Session{}, false
	}
	s, tools, ok := r.session(tenant, id)
	if !ok {
		return store.Session{}, false // read with the lock, and held again
	}
	stale := func(_ pgconn.CommandTag, err error) error {
		if isDivisionByZero(err) {
			t.track.guardFailed, t.track.heldStale = true, true
			return errHeldStale
		}
		return err
	}
	t.tx.queue(heldGuard, stale, tenant, id, s.Version, s.CreatedAt, s.UpdatedAt)
	ahead := &readAhead{tenant: tenant, id: id, calls: slices.Clone(r.calls), hasCalls: ra.OpenToolCalls}
	if ra.PreparedView {
		h := r.hints
		if h.found {
			t.tx.queue(heldHints, stale, tenant, id, h.view.Fixed, store.EncodeIDRuns(h.view.IDs), h.view.ViewToken)
			ahead.view = clonePreparedView(h.view)
		} else {
			t.tx.queue(heldNoHints, stale, tenant, id)
			ahead.viewErr = store.ErrNotFound
		}
		ahead.hasView = true
	}
	if t.heads.due(ra) {
		t.tx.queue(noHeadsGuard, t.heads.check, tenant, ra.NoHeads)
	}
	t.track.guard, t.track.guardSends = len(t.tx.queued)-1, t.tx.sends
	// After the guards' queue (writes, which drop what was read ahead):
	// the open calls and the hints row answer the transaction's next
	// read of them, once.
	t.tx.ahead = ahead
	t.held = heldTools{tenant: tenant, id: id, tools: tools, digested: true} // every held row's were written digested
	t.track.lockedAt(k, slices.Clone(r.calls), true)
	t.track.hints = r.hints // held rows are not changed: shared
	t.track.usedHeld, t.track.guarded = true, true
	return s, true
}

func clonePreparedView(v store.PreparedView) store.PreparedView {
	v.IDs = slices.Clone(v.IDs)
	return v
}

// putHints records a PutPreparedView of the locked session (a copy: the
// held hints are shared by the transactions that start from them, and
// each hands out a copy of its own).
func (h *heldTrack) putHints(k heldKey, v store.PreparedView) {
	if h.locked && h.key == k {
		h.hints = heldHintsRow{known: true, found: true, view: clonePreparedView(v)}
	}
}

// lockedAt records the lock of k with its open calls when known.
func (h *heldTrack) lockedAt(k heldKey, calls []store.ToolCall, known bool) {
	if h.locked && h.key != k {
		// A second session: neither is held.
		h.touched = append(h.touched, h.key, k)
		h.callsKnown, h.wrote = false, nil
		return
	}
	h.key, h.locked, h.calls, h.callsKnown = k, true, calls, known
	h.hints = heldHintsRow{}
}

// putCalls applies a PutToolCalls of the locked session to its open
// calls: a call without a result is open, one with a result is not. Calls
// made at one position (one message's) are ordered by the database's
// collation, which this does not know: the open calls are then unknown.
func (h *heldTrack) putCalls(k heldKey, calls []store.ToolCall) {
	if !h.locked || h.key != k || !h.callsKnown {
		return
	}
	for _, c := range calls {
		h.calls = slices.DeleteFunc(h.calls, func(o store.ToolCall) bool { return o.CallID == c.CallID })
		if c.ResultPosition == 0 {
			h.calls = append(h.calls, store.ToolCall{CallID: c.CallID, Position: c.Position})
		}
	}
	slices.SortFunc(h.calls, func(a, b store.ToolCall) int { return cmp.Compare(a.Position, b.Position) })
	for i := 1; i < len(h.calls); i++ {
		if h.calls[i].Position == h.calls[i-1].Position {
			h.callsKnown, h.calls = false, nil
			return
		}
	}
}

// updated records UpdateSession's row of the locked session (j its
// columns' JSON, j.Tools the column's text after it, digest the name the
// tools codec keeps them by, heldDigest: "" to keep the text).
func (h *heldTrack) updated(s *store.Session, j store.SessionJSON, digest string) {
	k := heldKey{s.Tenant, s.ID}
	if !h.locked || h.key != k {
		h.touched = append(h.touched, k)
		return
	}
	r := &heldRow{s: *s, json: j}
	if digest != "" {
		r.json.Tools, r.toolsDigest = "", digest // the tools codec's (toolsHintOf)
	}
	r.s.Tools, r.s.Policy, r.s.Labels = nil, compaction.Overrides{}, nil // json's
	// As stored: timestamptz keeps microseconds.
	r.s.CreatedAt = r.s.CreatedAt.UTC().Truncate(time.Microsecond)
	r.s.UpdatedAt = r.s.UpdatedAt.UTC().Truncate(time.Microsecond)
	h.wrote = r
}

// gone records a write that leaves no row to hold (a delete, an insert).
func (h *heldTrack) gone(k heldKey) {
	h.touched = append(h.touched, k)
	if h.locked && h.key == k {
		h.wrote, h.callsKnown = nil, false
	}
}

// failedOnHeld has the guards answered when fn failed having started from
// the held row and they are still queued: they are sent alone (with BEGIN,
// not the writes after them), the round trip a failed call on a held row
// costs to know whether the row was the stored one — an answer computed
// from a stale row (a refusal, a decision) is not the call's. What they
// answer is recorded (guardFailed, heads.failed), and inTx alone makes it
// the transaction's error.
//
// So is a ToolCalls guess's guard still queued (knowncalls.go), with what
// was queued before it (the writes after the lock, rolled back with the
// transaction): a refusal computed on the guess is not the call's either.
func (t *txn) failedOnHeld(ctx context.Context) {
	h := &t.track
	last := -1 // the last statement to send; sent ones were answered already
	if h.guarded && t.tx.sends == h.guardSends {
		last = h.guard
	}
	if h.unknownQueued && t.tx.sends == h.unknownSends {
		last = max(last, h.unknownAt)
	}
	if last < 0 || last >= len(t.tx.queued) {
		return
	}
	t.tx.queued = t.tx.queued[:last+1]
	if br, err := t.tx.send(ctx, ""); err == nil {
		br.Close() //nolint:errcheck // the guards' checks record what they answered
	}
}

// committed holds what the committed transaction wrote, and forgets what
// it changed otherwise.
func (t *txn) committed() {
	h := &t.track
	for _, k := range h.touched {
		t.rows.forget(k)
	}
	if h.wrote == nil {
		return
	}
	if !h.callsKnown {
		t.rows.forget(h.key)
		return
	}
	r := *h.wrote
	r.calls = slices.Clone(h.calls)
	r.hints = h.hints
	t.rows.put(h.key, &r)
}

// runTx runs fn in a pipelined transaction (inTx), and once more without
// the held row when the held row's guard failed.
func runTx(ctx context.Context, s *Store, fn func(context.Context, store.Tx) error) error {
	err := inTx(ctx, s.pool, &s.rows, false, fn)
	if errors.Is(err, errHeldStale) {
		err = inTx(ctx, s.pool, &s.rows, true, fn)
	}
	return err
}

// lockedAhead records the lock of the session read under it, with what
// was read ahead (left to the transaction's reads).
func (t *txn) lockedAhead(tenant, id string) {
	k := heldKey{tenant, id}
	a := t.tx.ahead
	if a == nil || a.tenant != tenant || a.id != id {
		t.track.lockedAt(k, nil, false)
		return
	}
	t.track.lockedAt(k, slices.Clone(a.calls), a.hasCalls)
	if a.hasView && t.track.key == k {
		t.track.hints = heldHintsRow{known: true, found: a.viewErr == nil, view: clonePreparedView(a.view)}
	}
}

// HeldSession implements store.HeldRowReader: the row this Store's last
// transaction of the session committed (heldrow.go), as a read returns it.
func (s *Store) HeldSession(tenant, id string) (store.Session, bool) {
	r := s.rows.offered(heldKey{tenant, id})
	if r == nil {
		return store.Session{}, false
	}
	row, _, ok := r.session(tenant, id)
	return row, ok
}
