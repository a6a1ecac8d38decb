package retention

import (
	"cmp"
	"context"
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

// strayBatch bounds the sessions one pass looks at (two index probes
// each) and the rows one transaction deletes (as the engine's rewrites
// stage and sweep them).
const strayBatch = 1000

// maxSeen bounds the stray generations Strays remembers between passes
// (about 100 bytes each): past it, a newly found one is remembered at a
// later pass.
const maxSeen = 10 * strayBatch

// Strays remembers, between passes, when each stray generation was first
// seen, and where the last pass stopped: a pass looks at the next Sessions
// sessions (strayBatch when 0) in key order, not at every session, so its
// work is bounded however many sessions the store holds; the passes go
// round all of them (a round), and start over at the end. A generation is
// deleted when a pass finds it again at least Age after one first found
// it, and forgotten when a whole round did not find it.
type Strays struct {
	Age      time.Duration
	Sessions int
	seen     map[store.ViewGen]seenStray
	next     store.StrayCursor
	round    int
}

// seenStray is when a generation was first found stray, and the last
// round that found it.
type seenStray struct {
	first time.Time
	round int
}

// Sweep lists the stray generations of the next sessions at now, deletes
// those seen Age ago or earlier, in batches, and remembers the others; it
// reports the generations and rows it deleted.
func (x *Strays) Sweep(ctx context.Context, st store.Store, now time.Time) (gens, rows int, err error) {
	found, next, err := st.StrayViewGens(ctx, x.next, cmp.Or(x.Sessions, strayBatch))
	if err != nil {
		return 0, 0, err
	}
	if x.seen == nil {
		x.seen = map[store.ViewGen]seenStray{}
	}
	for _, g := range found {
		seen, ok := x.seen[g]
		if !ok || now.Sub(seen.first) < x.Age {
			if ok || len(x.seen) < maxSeen {
				x.seen[g] = seenStray{first: cmp.Or(seen.first, now), round: x.round}
			}
			continue
		}
		delete(x.seen, g)
		for {
			n, err := st.DropViewGen(ctx, g, strayBatch)
			if err != nil {
				return gens, rows, err
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
	}
	return gens, rows, nil
}
