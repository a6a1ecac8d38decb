package sqlite_test

import (
	"testing"

	"github.com/contextd/contextd/internal/store/storetest"
)

// TestForksPurgedTogetherIsLinear: a parent and its 200 forks, deleted
// and purged in one run, cost work linear in the forks: the test's own
// trigger counts the renames of a fork's row (its body_session changed)
// the purge makes. Before, the cascade copied the parent's row into the
// first fork and renamed the others to it, then did so again as each
// heir's session went: 19,900 renames.
func TestForksPurgedTogetherIsLinear(t *testing.T) {
	const forks = 200
	s, db := openWithDB(t)
	for _, q := range []string{
		`CREATE TABLE test_renames (n INTEGER NOT NULL)`,
		`INSERT INTO test_renames VALUES (0)`,
		`CREATE TRIGGER test_renamed AFTER UPDATE OF body_session ON messages WHEN NEW.body_session IS NOT NULL
			BEGIN UPDATE test_renames SET n = n + 1; END`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	storetest.ForksPurgedTogether(t, s, forks)
	var n int
	if err := db.QueryRow(`SELECT n FROM test_renames`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n > forks {
		t.Errorf("purging a parent and its %d forks renamed forks' rows %d times; want at most %d", forks, n, forks)
	}
}
