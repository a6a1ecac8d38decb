package migrations_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/postgres"
	"github.com/contextd/contextd/internal/store/sqlite"
)

// TestSummariesOrderUpgrade: a database of the release before the order of
// summary records (00017 applied as released; on PostgreSQL 00018 too)
// holding a session's summary row upgrades to the head when the store
// opens it, and the row, which has no order of its own, is replaced by any
// record, even one of order zero (migration 00019's defaults); a record
// older than the one that replaced it then leaves it. Both stores.
func TestSummariesOrderUpgrade(t *testing.T) {
	ctx := t.Context()
	check := func(t *testing.T, s store.Store) {
		t.Helper()
		find := func(digest string) bool {
			t.Helper()
			hits, err := s.FindSummaries(ctx, "t", []string{digest}, 2)
			if err != nil {
				t.Fatal(err)
			}
			return len(hits) == 1 && hits[0].SessionID == "s" && hits[0].Live
		}
		if !find("d-released") {
			t.Fatal("the released row is not found after the upgrade")
		}
		if err := s.RecordSummary(ctx, "t", "s", store.SummaryRecord{Digest: "d-new"}); err != nil {
			t.Fatalf("RecordSummary over the released row: %v", err)
		}
		if !find("d-new") || find("d-released") {
			t.Fatal("a record did not replace the released row")
		}
		if err := s.RecordSummary(ctx, "t", "s", store.SummaryRecord{Digest: "d-newer", Version: 2, Seq: 5}); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordSummary(ctx, "t", "s", store.SummaryRecord{Digest: "d-late", Version: 2, Seq: 4}); err != nil {
			t.Fatal(err)
		}
		if !find("d-newer") || find("d-late") {
			t.Fatal("an older record replaced a newer one")
		}
	}
	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		db, err := sql.Open("sqlite", "file:"+filepath.ToSlash(filepath.Join(dir, sqlite.FileName))+"?_pragma=foreign_keys(1)")
		if err != nil {
			t.Fatal(err)
		}
		released(t, goose.DialectSQLite3, db, "sqlite", "?", 17)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		s, err := sqlite.Open(ctx, dir)
		if err != nil {
			t.Fatalf("open (upgrade): %v", err)
		}
		defer s.Close()
		check(t, s)
	})
	t.Run("postgres", func(t *testing.T) {
		url := pgtest.URL(t) // migrated: emptied, then migrated to 00018
		db, err := sql.Open("pgx", url)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, `DROP SCHEMA public CASCADE; CREATE SCHEMA public`); err != nil {
			t.Fatal(err)
		}
		released(t, goose.DialectPostgres, db, "postgres", "$", 18)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		s, err := postgres.Open(ctx, url)
		if err != nil {
			t.Fatalf("open (upgrade): %v", err)
		}
		defer s.Close()
		check(t, s)
	})
}

// released migrates db up to version (the release's head) and stores a
// session with a summary row as that release did.
func released(t *testing.T, dialect goose.Dialect, db *sql.DB, dir, mark string, version int64) {
	t.Helper()
	ctx := t.Context()
	p, err := goose.NewProvider(dialect, db, os.DirFS(dir), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, version); err != nil {
		t.Fatal(err)
	}
	if v, err := p.GetDBVersion(ctx); err != nil || v != version {
		t.Fatalf("database at version %d (%v), want %d", v, err, version)
	}
	arg := func(i int) string { return mark + strconv.Itoa(i) }
	if _, err := db.ExecContext(ctx, `INSERT INTO sessions (tenant, id, model, version, created_at, updated_at) VALUES (`+arg(1)+`, `+arg(2)+`, 'm', 1, `+arg(3)+`, `+arg(3)+`)`,
		"t", "s", now(dialect)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO summaries_by_digest (tenant, session_id, digest) VALUES (`+arg(1)+`, `+arg(2)+`, `+arg(3)+`)`,
		"t", "s", "d-released"); err != nil {
		t.Fatal(err)
	}
}
