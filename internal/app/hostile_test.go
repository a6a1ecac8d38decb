package app

import (
	"runtime"
	"testing"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
	"github.com/contextd/contextd/internal/pgtest"
)

// The hostile-input suite (hostile_<surface>_test.go) tries what a review
// found as an authenticated tenant, over the real listener on both stores,
// and asserts the error code, the cost against an ordinary request of the
// same size (by allocated bytes, never by wall-clock time), and that the
// session is intact afterwards. This file holds what the surfaces share.

// onBothStores runs fn against a real server on SQLite and on PostgreSQL,
// each with env.
func onBothStores(t *testing.T, env map[string]string, fn func(t *testing.T, client contextdv1.ContextServiceClient)) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			e := map[string]string{}
			for k, v := range env {
				e[k] = v
			}
			if backend == "postgres" {
				e["CONTEXTD_DATABASE_URL"] = pgtest.URL(t)
			}
			fn(t, contextdv1.NewContextServiceClient(startServer(t, e)))
		})
	}
}

// allocated is the bytes the process (client and in-process server)
// allocates while call runs: the least of three runs, so that a collection
// or a warm-up in between does not count.
func allocated(t *testing.T, call func() error) (uint64, error) {
	t.Helper()
	best := ^uint64(0)
	var err error
	for range 3 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		err = call()
		runtime.ReadMemStats(&after)
		best = min(best, after.TotalAlloc-before.TotalAlloc)
	}
	return best, err
}
