package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/postgres"
)

// TestToolsLeftOutForTheirDigest: each read of a session's row (the pool's,
// the match's with the history lookup, the lock's plain and with reads
// ahead) leaves the tools column out when the row's digest is the one the
// replica holds, and sends it when the guess is stale (another tenant's
// session of the same id, a transaction that wrote other tools and rolled
// back, a writer before the digest's migration). To see whether a read left the column out, the test makes the
// replica's guess lie: the row's digest with another text.
func TestToolsLeftOutForTheirDigest(t *testing.T) {
	t.Cleanup(postgres.ForgetToolsHints) // its lying guesses stay in this test
	s, conn := storeAndConn(t)
	tools := func(name string) []chat.Tool {
		return []chat.Tool{{Name: name, Description: strings.Repeat(name+" ", 400), Parameters: `{"type":"object"}`}}
	}
	text := func(ts []chat.Tool) string {
		b, err := json.Marshal(ts)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	stored, other := tools("read"), tools("write")
	for _, tenant := range []string{"t", "u"} {
		ts := stored
		if tenant == "u" {
			ts = other
		}
		sess := &store.Session{Tenant: tenant, ID: "s", Model: "gpt-4o", Tools: ts, Version: 1, ToolsTokens: 1}
		if err := s.InTx(t.Context(), func(ctx context.Context, tx store.Tx) error { return tx.InsertSession(ctx, sess) }); err != nil {
			t.Fatal(err)
		}
	}
	var same bool
	if err := conn.QueryRow(t.Context(), `SELECT bool_and(tools_digest = sha256(convert_to(tools, 'UTF8')) AND tools_digest_version = version) FROM sessions`).Scan(&same); err != nil || !same {
		t.Fatalf("the digests written: as SQL computes them, of the row's version %v (%v)", same, err)
	}
	reads := map[string]func(ctx context.Context, tenant string) (store.Session, error){
		"GetSession": func(ctx context.Context, tenant string) (store.Session, error) { return s.GetSession(ctx, tenant, "s") },
		"FindHistoryAndSession": func(ctx context.Context, tenant string) (store.Session, error) {
			_, row, err := s.FindHistoryAndSession(ctx, tenant, []string{"c"}, 4, "s")
			return row, err
		},
		"lock": func(ctx context.Context, tenant string) (row store.Session, err error) {
			err = s.InTx(ctx, func(ctx context.Context, tx store.Tx) error { row, err = tx.GetSession(ctx, tenant, "s"); return err })
			return row, err
		},
		"lock reading ahead": func(ctx context.Context, tenant string) (row store.Session, err error) {
			ctx = store.WithReadAhead(ctx, store.ReadAhead{OpenToolCalls: true, PreparedView: true})
			err = s.InTx(ctx, func(ctx context.Context, tx store.Tx) error { row, err = tx.GetSession(ctx, tenant, "s"); return err })
			return row, err
		},
	}
	for name, read := range reads {
		check := func(what, tenant string, want []chat.Tool) {
			t.Helper()
			row, err := read(t.Context(), tenant)
			if err != nil {
				t.Fatalf("%s, %s: %v", name, what, err)
			}
			if !slices.Equal(row.Tools, want) {
				t.Errorf("%s, %s: tools %q, want %q", name, what, row.Tools[0].Name, want[0].Name)
			}
		}
		// The row's digest, held with another text: the column was left out.
		postgres.HintTools("t", "s", text(other), text(stored))
		check("the row's digest held", "t", other)
		// Another text under its own digest: the row's tools are sent.
		postgres.HintTools("t", "s", text(other), text(other))
		check("a stale guess", "t", stored)
		// The guess is the tenant's: tenant u's session s has its own.
		postgres.HintTools("u", "s", text(stored), text(stored))
		check("another tenant's session of the same id", "u", other)
	}
	// A transaction that writes other tools and rolls back leaves the
	// replica's guess stale: the next read sends the row's.
	boom := errors.New("boom")
	err := s.InTx(t.Context(), func(ctx context.Context, tx store.Tx) error {
		row, err := tx.GetSession(ctx, "t", "s")
		if err != nil {
			return err
		}
		row.Version++
		row.Tools = other
		if err := tx.UpdateSession(ctx, &row); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	for name, read := range reads {
		if row, err := read(t.Context(), "t"); err != nil || !slices.Equal(row.Tools, stored) {
			t.Errorf("%s after a rolled back update of the tools: %v, %v", name, row.Tools, err)
		}
	}
	// A replica before migration 00018's code writes the tools (and
	// the version) and leaves the digest: a guess of the digest left
	// behind is not trusted.
	if _, err := conn.Exec(t.Context(), `UPDATE sessions SET tools = $1, version = version + 1 WHERE tenant = 't' AND id = 's'`, text(other)); err != nil {
		t.Fatal(err)
	}
	for name, read := range reads {
		postgres.HintTools("t", "s", text(stored), text(stored))
		if row, err := read(t.Context(), "t"); err != nil || !slices.Equal(row.Tools, other) {
			t.Errorf("%s after an older writer's update of the tools: %v, %v", name, row.Tools[0].Name, err)
		}
	}
}

// TestToolsDigestOfAnOlderWriter: a row whose tools an older writer
// changed (its digest left behind, of an older version) and that this
// code then updates without changing the tools (the column left out,
// heldTools) gets the digest of the tools it holds, of its version: not
// the digest left behind, of other tools, which a replica holding those
// would read as the row's; and the row's reads leave its tools out again.
func TestToolsDigestOfAnOlderWriter(t *testing.T) {
	t.Cleanup(postgres.ForgetToolsHints) // its lying guesses stay in this test
	s, conn := storeAndConn(t)
	tools := func(name string) []chat.Tool {
		return []chat.Tool{{Name: name, Description: strings.Repeat(name+" ", 400), Parameters: `{"type":"object"}`}}
	}
	stored, other := tools("read"), tools("write")
	b, err := json.Marshal(stored)
	if err != nil {
		t.Fatal(err)
	}
	storedText := string(b)
	if b, err = json.Marshal(other); err != nil {
		t.Fatal(err)
	}
	sess := &store.Session{Tenant: "t", ID: "old", Model: "gpt-4o", Tools: stored, Version: 1, ToolsTokens: 1}
	if err := s.InTx(t.Context(), func(ctx context.Context, tx store.Tx) error { return tx.InsertSession(ctx, sess) }); err != nil {
		t.Fatal(err)
	}
	// The older writer: the tools and the version, not the digest.
	if _, err := conn.Exec(t.Context(), `UPDATE sessions SET tools = $1, version = version + 1 WHERE tenant = 't' AND id = 'old'`, string(b)); err != nil {
		t.Fatal(err)
	}
	// This code's update of the row, its tools unchanged.
	if err := s.InTx(t.Context(), func(ctx context.Context, tx store.Tx) error {
		row, err := tx.GetSession(ctx, "t", "old")
		if err != nil {
			return err
		}
		row.Version++
		return tx.UpdateSession(ctx, &row)
	}); err != nil {
		t.Fatal(err)
	}
	var healed bool
	if err := conn.QueryRow(t.Context(), `SELECT coalesce(tools_digest_version = version AND tools_digest = sha256(convert_to(tools, 'UTF8')), false)
		FROM sessions WHERE tenant = 't' AND id = 'old'`).Scan(&healed); err != nil {
		t.Fatal(err)
	}
	if !healed {
		t.Error("the row's digest is not of its tools at its version")
	}
	// A replica that holds the tools of the digest left behind.
	postgres.HintTools("t", "old", storedText, storedText)
	row, err := s.GetSession(t.Context(), "t", "old")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(row.Tools, other) {
		t.Errorf("tools %q, want %q (the row's)", row.Tools[0].Name, other[0].Name)
	}
	// The row's digest held (with another text, to see the column left out).
	postgres.HintTools("t", "old", storedText, string(b))
	if row, err = s.GetSession(t.Context(), "t", "old"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(row.Tools, stored) {
		t.Errorf("the row's digest held: tools %q, want the column left out", row.Tools[0].Name)
	}
}

// TestToolsDigestNotOfItsTools: a row whose digest, of its version, is not
// that of its tools (a writer that broke the column's rule) puts nothing
// in the texts this process keeps by digest for every tenant: tenant t,
// whose session has the tools of that digest, reads its own tools, not
// tenant u's.
func TestToolsDigestNotOfItsTools(t *testing.T) {
	s, conn := storeAndConn(t)
	tools := func(name string) []chat.Tool {
		return []chat.Tool{{Name: name, Description: strings.Repeat(name+" ", 400), Parameters: `{"type":"object"}`}}
	}
	mine, theirs := tools("mine"), tools("theirs")
	for tenant, ts := range map[string][]chat.Tool{"t": mine, "u": theirs} {
		sess := &store.Session{Tenant: tenant, ID: "s", Model: "gpt-4o", Tools: ts, Version: 1, ToolsTokens: 1}
		if err := s.InTx(t.Context(), func(ctx context.Context, tx store.Tx) error { return tx.InsertSession(ctx, sess) }); err != nil {
			t.Fatal(err)
		}
	}
	// u's row carries t's digest, at its version.
	if _, err := conn.Exec(t.Context(), `UPDATE sessions SET tools_digest = (SELECT tools_digest FROM sessions WHERE tenant = 't' AND id = 's')
		WHERE tenant = 'u' AND id = 's'`); err != nil {
		t.Fatal(err)
	}
	postgres.ForgetToolsHints()
	if _, err := s.GetSession(t.Context(), "u", "s"); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the first read sends t's tools, the second leaves them out
		row, err := s.GetSession(t.Context(), "t", "s")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(row.Tools, mine) {
			t.Fatalf("tenant t read tools %q, want %q", row.Tools[0].Name, mine[0].Name)
		}
	}
}

// TestToolsDigestWrittenOnUpdate: a row without a digest (one from before
// migration 00018, which leaves them so) gets the digest of its tools, of
// its version, at its next update, the tools column left out.
func TestToolsDigestWrittenOnUpdate(t *testing.T) {
	s, conn := storeAndConn(t)
	tools := []chat.Tool{{Name: "read", Description: strings.Repeat("read ", 400), Parameters: `{"type":"object"}`}}
	sess := &store.Session{Tenant: "t", ID: "before", Model: "gpt-4o", Tools: tools, Version: 1, ToolsTokens: 1}
	if err := s.InTx(t.Context(), func(ctx context.Context, tx store.Tx) error { return tx.InsertSession(ctx, sess) }); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), `UPDATE sessions SET tools_digest = NULL, tools_digest_version = NULL`); err != nil {
		t.Fatal(err)
	}
	if err := s.InTx(t.Context(), func(ctx context.Context, tx store.Tx) error {
		row, err := tx.GetSession(ctx, "t", "before")
		if err != nil {
			return err
		}
		row.Version++
		return tx.UpdateSession(ctx, &row)
	}); err != nil {
		t.Fatal(err)
	}
	var digested bool
	if err := conn.QueryRow(t.Context(), `SELECT coalesce(tools_digest_version = version AND tools_digest = sha256(convert_to(tools, 'UTF8')), false)
		FROM sessions WHERE tenant = 't' AND id = 'before'`).Scan(&digested); err != nil {
		t.Fatal(err)
	}
	if !digested {
		t.Error("the row's digest is not of its tools at its version after its update")
	}
}
