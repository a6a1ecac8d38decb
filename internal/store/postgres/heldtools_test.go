package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/postgres"
)

// storeAndConn opens a store on a new database, and a connection of the
// test's own to it; both closed when the test ends.
func storeAndConn(t *testing.T) (*postgres.Store, *pgx.Conn) {
	url := pgtest.URL(t)
	s, err := postgres.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return s, conn
}

// TestUnchangedToolsKeepTheirTOAST: an update of a session's row whose
// tools are those it holds leaves the tools column out, so the row keeps
// its TOAST value (the same chunks: none written again, no WAL for them);
// new tools are written.
func TestUnchangedToolsKeepTheirTOAST(t *testing.T) {
	s, conn := storeAndConn(t)
	var toast string
	if err := conn.QueryRow(t.Context(), `SELECT reltoastrelid::regclass::text FROM pg_class WHERE oid = 'sessions'::regclass`).Scan(&toast); err != nil {
		t.Fatal(err)
	}
	chunks := func() []uint32 {
		t.Helper()
		var ids []uint32
		if err := conn.QueryRow(t.Context(), `SELECT coalesce(array_agg(DISTINCT chunk_id ORDER BY chunk_id), '{}') FROM `+toast).Scan(&ids); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	// Tools that do not compress below TOAST's threshold.
	tools := func() []chat.Tool {
		b := make([]byte, 20_000)
		rand.Read(b)
		return []chat.Tool{{Name: "read", Description: hex.EncodeToString(b), Parameters: `{"type":"object"}`}}
	}
	held := tools()
	sess := &store.Session{Tenant: "t", ID: "s", Model: "gpt-4o", Tools: held, Version: 1, ToolsTokens: 1}
	if err := s.InTx(t.Context(), func(ctx context.Context, tx store.Tx) error { return tx.InsertSession(ctx, sess) }); err != nil {
		t.Fatal(err)
	}
	before := chunks()
	if len(before) != 1 {
		t.Fatalf("the tools' TOAST values: %v, want one", before)
	}
	update := func(ctx context.Context, ts []chat.Tool) {
		t.Helper()
		err := s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
			row, err := tx.GetSession(ctx, "t", "s")
			if err != nil {
				return err
			}
			row.Version++
			row.Tools = ts
			return tx.UpdateSession(ctx, &row)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	update(t.Context(), held)
	update(store.Pipelined(t.Context()), held)
	if after := chunks(); !slices.Equal(after, before) {
		t.Errorf("the same tools, updated twice: TOAST values %v, want %v kept", after, before)
	}
	update(t.Context(), tools())
	if after := chunks(); len(after) != 1 || after[0] == before[0] {
		t.Errorf("new tools: TOAST values %v, want a new one for %v", after, before)
	}
}
