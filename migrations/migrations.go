// Package migrations embeds contextd's numbered SQL migrations, one folder a
// dialect, and applies them with goose. On PostgreSQL a session-level
// advisory lock makes concurrent starts (many replicas, or a migration Job)
// apply each migration once.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed postgres/*.sql sqlite/*.sql
var files embed.FS

// UpPostgres applies every pending PostgreSQL migration under an advisory
// lock and returns how many it applied.
func UpPostgres(ctx context.Context, db *sql.DB) (int, error) {
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return 0, fmt.Errorf("migration lock: %w", err)
	}
	return up(ctx, goose.DialectPostgres, db, "postgres", goose.WithSessionLocker(locker))
}

// UpSQLite applies every pending SQLite migration.
func UpSQLite(ctx context.Context, db *sql.DB) (int, error) {
	return up(ctx, goose.DialectSQLite3, db, "sqlite")
}

func up(ctx context.Context, dialect goose.Dialect, db *sql.DB, dir string, opts ...goose.ProviderOption) (int, error) {
	sub, err := fs.Sub(files, dir)
	if err != nil {
		return 0, err
	}
	opts = append(opts, goose.WithDisableGlobalRegistry(true))
	p, err := goose.NewProvider(dialect, db, sub, opts...)
	if err != nil {
		return 0, fmt.Errorf("migrations: %w", err)
	}
	results, err := p.Up(ctx)
	if err != nil {
		return 0, fmt.Errorf("apply migrations: %w", err)
	}
	return len(results), nil
}
