package migrations_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite"

	"github.com/contextd/contextd/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestSummariesByDigestUpDownUp: the migration of summaries_by_digest
// (gateway/unsignalledsummary.go) goes up, down (the table and its index
// gone, a session's row kept) and up again, on both stores.
func TestSummariesByDigestUpDownUp(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		db, err := sql.Open("sqlite", "file:"+filepath.ToSlash(filepath.Join(t.TempDir(), "m.db"))+"?_pragma=foreign_keys(1)")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		upDownUp(t, goose.DialectSQLite3, db, "sqlite", "?")
	})
	t.Run("postgres", func(t *testing.T) {
		db, err := sql.Open("pgx", pgtest.URL(t)) // migrated
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		upDownUp(t, goose.DialectPostgres, db, "postgres", "$")
	})
}

func upDownUp(t *testing.T, dialect goose.Dialect, db *sql.DB, dir, mark string) {
	ctx := context.Background()
	p, err := goose.NewProvider(dialect, db, os.DirFS(dir), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	var version int64
	for _, s := range p.ListSources() {
		if strings.HasSuffix(s.Path, "_summaries_by_digest.sql") {
			version = s.Version
		}
	}
	if version == 0 {
		t.Fatal("no migration of summaries_by_digest")
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	arg := func(i int) string { return mark + strconv.Itoa(i) } // ?1 or $1
	exec := func(q string, args ...any) error {
		_, err := db.ExecContext(ctx, q, args...)
		return err
	}
	if err := exec(`INSERT INTO sessions (tenant, id, model, version, created_at, updated_at) VALUES (`+arg(1)+`, `+arg(2)+`, 'm', 1, `+arg(3)+`, `+arg(3)+`)`,
		"t", "s", now(dialect)); err != nil {
		t.Fatal(err)
	}
	record := func() error {
		return exec(`INSERT INTO summaries_by_digest (tenant, session_id, digest, version, seq) VALUES (`+arg(1)+`, `+arg(2)+`, `+arg(3)+`, 1, 1)`, "t", "s", "d")
	}
	if err := record(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, version-1); err != nil {
		t.Fatal(err)
	}
	if err := record(); err == nil {
		t.Fatal("summaries_by_digest is still there after its migration went down")
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sessions`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("sessions after down: %d, %v", n, err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if err := record(); err != nil {
		t.Fatalf("up again: %v", err)
	}
}

// now is a created_at of dialect's sessions table.
func now(dialect goose.Dialect) any {
	if dialect == goose.DialectPostgres {
		return "2026-01-01T00:00:00Z"
	}
	return int64(1)
}
