package retention

import (
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

// strayBatch bounds the generations one pass looks at and the rows one
// transaction deletes (as the engine's rewrites stage and sweep them).
const strayBatch = 1000

// Strays remembers, between passes, when each stray generation was first
// seen. It holds at most strayBatch of them.
type Strays struct {
	Age  time.Duration
	seen map[store.ViewGen]time.Time
}

// Sweep lists the stray generations at now, deletes those seen Age ago or
// earlier, in batches, and remembers the others; it reports the
// generations and rows it deleted.
func (x *Strays) Sweep(ctx context.Context, st store.Store, now time.Time) (gens, rows int, err error) {
	found, err := st.StrayViewGens(ctx, strayBatch)
	if err != nil {
		return 0, 0, err
	}
	seen := make(map[store.ViewGen]time.Time, len(found))
	for _, g := range found {
		first, ok := x.seen[g]
		if !ok || now.Sub(first) < x.Age {
			if !ok {
				first = now
			}
			seen[g] = first
			continue
		}
		for {
			n, err := st.DropViewGen(ctx, g, strayBatch)
			if err != nil {
				x.seen = seen
				return gens, rows, err
			}
			if rows += n; n < strayBatch {
				break
			}
		}
		gens++
	}
	x.seen = seen
	return gens, rows, nil
}
