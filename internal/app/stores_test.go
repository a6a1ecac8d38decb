package app

import (
	"maps"
	"testing"

	"github.com/contextd/contextd/internal/pgtest"
)

// onBothStoresEnv runs test once on embedded SQLite and once on PostgreSQL,
// each with its own copy of env (PostgreSQL's with its database URL).
func onBothStoresEnv(t *testing.T, env map[string]string, test func(t *testing.T, env map[string]string)) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			env := maps.Clone(env)
			if backend == "postgres" {
				env["CONTEXTD_DATABASE_URL"] = pgtest.URL(t)
			}
			test(t, env)
		})
	}
}
