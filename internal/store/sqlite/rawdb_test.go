package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/contextd/contextd/internal/store/sqlite"
)

// openWithDB opens a store in a temporary directory and a connection of
// the test's own to its file, for what a test reads or adds (a counting
// trigger) beside the store.
func openWithDB(t *testing.T) (*sqlite.Store, *sql.DB) {
	t.Helper()
	dir := t.TempDir()
	s, err := sqlite.Open(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	db, err := sql.Open("sqlite", filepath.Join(dir, sqlite.FileName)+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return s, db
}
