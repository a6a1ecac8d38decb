package retention

import (
	"cmp"
	"context"
	"hash/maphash"
	"time"

	"github.com/contextd/contextd/internal/store"
)

// Abandoned view generations. A clear, revert or compaction of a large
// view stages the new view in batches of their own transactions and makes
// it the session's in a last short one (store.Tx.StageView, FlipView); a
// replica killed in between leaves the staged rows, which no reader sees
// and only the session's next rewrite would sweep — a session never
// rewritten again kept them for ever. Strays finds them across sessions
// and deletes those it saw at a pass at least Age before: a live rewrite
// stages for seconds (a 100,000-message view in about one), so a
// generation still stray after Age is abandoned, and a replaced one
// (waiting for its rewrite's own sweep) is garbage anyway. Were a live
// rewrite ever slower than Age, dropping its rows makes its flip find the
// generation incomplete (ErrVersionConflict): the call is retried and
// nothing is lost.

// StrayAge is how long a view generation stays stray before it is
// deleted.
const StrayAge = 15 * time.Minute

// strayBatch bounds the sessions one listing looks at (two index probes
// each) and the rows one transaction deletes (as the engine's rewrites
// stage and sweep them).
const strayBatch = 1000

// strayPassBatches bounds the listings of strayBatch sessions one pass
// makes: a pass goes round a store of up to 100,000 sessions (200,000
// index probes in 100 statements), as the sweep did before its listing had
// a cursor, and a larger one over several passes; it deletes at most the
// maxSeen generations remembered before it. One listing a pass went
// round 1,000 sessions an hour (CONTEXTD_RETENTION_INTERVAL's default):
// 100,000 sessions in four days, and a generation abandoned there was
// deleted a round after it was found, up to eight days.
const strayPassBatches = 100

// maxSeen bounds the stray generations Strays remembers between passes
// (about 100 bytes each: a generation is remembered by a 64-bit hash, not
// its tenant and session ids, which no limit bounds but the request's
// size): past it, a newly found one is remembered at a later pass. Two
// generations of one hash (under one chance in 10^11 with 10,000
// remembered) share when they were first seen: one could be deleted
// early, which a live rewrite survives (its flip is retried).
const maxSeen = 10 * strayBatch

// Strays remembers, between passes, when each stray generation was first
// seen, and where the last pass stopped: a pass looks at the next
// sessions in key order, Batches listings (strayPassBatches when 0) of
// Sessions each (strayBatch when 0), stopping at the end of the round, not
// at every session in one statement, so its work is bounded however many
// sessions the store holds; the passes go round all of them (a round), and
// start over at the end. A generation is deleted when a pass finds it again
// at least Age after one first found it, and forgotten when a whole round
// did not find it.
type Strays struct {
	Age      time.Duration
	Sessions int
	Batches  int
	seen     map[uint64]seenStray // by the hash of the generation (seed)
	seed     maphash.Seed
	next     store.StrayCursor
	round    int
}

// seenStray is when a generation was first found stray, and the last
// round that found it.
type seenStray struct {
	first time.Time
	round int
}

// Sweep lists the stray generations of the next sessions at now, a batch
// of sessions at a time up to the end of the round, deletes those seen Age
// ago or earlier, in batches, and remembers the others; it reports the
// generations and rows it deleted.
func (x *Strays) Sweep(ctx context.Context, st store.Store, now time.Time) (gens, rows int, err error) {
	for range cmp.Or(x.Batches, strayPassBatches) {
		g, r, end, err := x.batch(ctx, st, now)
		if gens, rows = gens+g, rows+r; err != nil || end {
			return gens, rows, err
		}
	}
	return gens, rows, nil
}

// batch is one listing of Sweep and what it deletes; end says the round
// ended with it.
func (x *Strays) batch(ctx context.Context, st store.Store, now time.Time) (gens, rows int, end bool, err error) {
	found, next, err := st.StrayViewGens(ctx, x.next, cmp.Or(x.Sessions, strayBatch))
	if err != nil {
		return 0, 0, false, err
	}
	if x.seen == nil {
		x.seen, x.seed = map[uint64]seenStray{}, maphash.MakeSeed()
	}
	for _, g := range found {
		k := maphash.Comparable(x.seed, g)
		seen, ok := x.seen[k]
		if !ok || now.Sub(seen.first) < x.Age {
			if ok || len(x.seen) < maxSeen {
				x.seen[k] = seenStray{first: cmp.Or(seen.first, now), round: x.round}
			}
			continue
		}
		delete(x.seen, k)
		for {
			n, err := st.DropViewGen(ctx, g, strayBatch)
			if err != nil {
				return gens, rows, false, err
			}
			if rows += n; n < strayBatch {
				break
			}
		}
		gens++
	}
	if x.next = next; next == (store.StrayCursor{}) {
		// The round is over: what it did not find is gone.
		for g, seen := range x.seen {
			if seen.round < x.round {
				delete(x.seen, g)
			}
		}
		x.round++
		return gens, rows, true, nil
	}
	return gens, rows, false, nil
}
