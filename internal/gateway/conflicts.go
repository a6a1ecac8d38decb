package gateway

import (
	"context"
	"math/rand/v2"
	"time"
)

// A write that meets a version conflict (another replica's report or
// append committed first) is tried again after a jittered, doubling wait,
// until the request's context ends or conflictBudget is spent — never a
// fixed count, which several replicas and an expand loop could exhaust.
const (
	conflictFirstWait = 5 * time.Millisecond
	conflictMaxWait   = 250 * time.Millisecond
	conflictBudget    = 10 * time.Second
)

// conflicts is one request's retries of a conflicting write.
type conflicts struct {
	start time.Time
	n     int
}

// again waits before the next try and says whether to make it: false once
// ctx ended, or would end during the wait, or the budget is spent.
func (c *conflicts) again(ctx context.Context) bool {
	if c.start.IsZero() {
		c.start = time.Now()
	}
	wait := min(conflictFirstWait<<min(c.n, 16), conflictMaxWait)
	wait = wait/2 + rand.N(wait/2+1)
	c.n++
	if time.Since(c.start)+wait > conflictBudget {
		return false
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
		return false
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
