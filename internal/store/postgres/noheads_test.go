package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/postgres"
)

// TestNoHeadsWithTheLock: a transaction given ReadAhead.NoHeads fails with
// ErrLongerSession, writing nothing, when another live session holds one of
// the chains as its head — on the held row's path, on the lock's, after a
// stale held row, when fn swallows its read's error, and when fn refuses on
// the held row before anything was sent — and commits when none does (a
// chain no session holds as its head, or a deleted session's head). Fails
// without the guard (the writes commit on the session that is not the
// longest).
func TestNoHeadsWithTheLock(t *testing.T) {
	url, s, other := twoReplicas(t)
	heldSession(t, s)
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	now := time.Now().UTC()
	for _, k := range [][2]string{{"t", "o"}, {"t", "gone"}, {"u", "o"}} { // u: another tenant's
		o := &store.Session{Tenant: k[0], ID: k[1], Model: "gpt-4o", Version: 1, CreatedAt: now, UpdatedAt: now}
		if err := s.InTx(t.Context(), func(ctx context.Context, tx store.Tx) error { return tx.InsertSession(ctx, o) }); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Exec(t.Context(), `INSERT INTO history_index (tenant, session_id, length, chain, head) VALUES
		('t', 'o', 1, 'c1', false), ('t', 'o', 2, 'c2', true), ('t', 'gone', 1, 'c3', true), ('u', 'o', 1, 'c4', true)`); err != nil {
		t.Fatal(err)
	}
	if err := s.InTx(t.Context(), func(ctx context.Context, tx store.Tx) error { return tx.DeleteSession(ctx, "t", "gone") }); err != nil {
		t.Fatal(err)
	}
	with := func(ctx context.Context, held bool, chains ...string) context.Context {
		return store.WithReadAhead(store.Pipelined(ctx), store.ReadAhead{OpenToolCalls: true, PreparedView: held, Held: held, NoHeads: chains})
	}
	// update bumps the row, taking (or not) its reads' errors.
	update := func(ctx context.Context, tx store.Tx, swallow bool) error {
		row, err := tx.GetSession(ctx, "t", "s")
		if err != nil {
			return err
		}
		if _, err := tx.ToolCalls(ctx, "t", "s", []string{"c9"}); err != nil && !swallow {
			return err
		}
		row.Version++
		row.LogCount++
		return tx.UpdateSession(ctx, &row)
	}
	stored := func() int64 {
		row, _ := lockedRow(t, s, "t", "s")
		return row.LogCount
	}
	check := func(name string, ctx context.Context, st *postgres.Store, fn func(context.Context, store.Tx) error, want error) {
		t.Helper()
		before := stored()
		err := st.InTx(ctx, fn)
		after := stored()
		switch {
		case want == nil && (err != nil || after != before+1):
			t.Errorf("%s: answered %v, log count %d → %d; want it written", name, err, before, after)
		case want != nil && (!errors.Is(err, want) || after != before):
			t.Errorf("%s: answered %v, log count %d → %d; want %v and nothing written", name, err, before, after, want)
		}
	}
	bump := func(ctx context.Context, tx store.Tx) error { return update(ctx, tx, false) }
	swallowing := func(ctx context.Context, tx store.Tx) error { return update(ctx, tx, true) }
	refusing := func(ctx context.Context, tx store.Tx) error {
		if _, err := tx.GetSession(ctx, "t", "s"); err != nil {
			return err
		}
		return errors.New("refused")
	}
	ctx := t.Context()
	check("held, no head among the chains", with(ctx, true, "c1", "c3", "c4", "cx"), s, bump, nil)
	check("held, a head", with(ctx, true, "cx", "c2"), s, bump, store.ErrLongerSession)
	check("held, a head, fn swallowing its read's error", with(ctx, true, "c2"), s, swallowing, store.ErrLongerSession)
	check("held, a head, fn refusing before anything was sent", with(ctx, true, "c2"), s, refusing, store.ErrLongerSession)
	check("the lock's path, a head", with(ctx, false, "c2"), s, bump, store.ErrLongerSession)
	check("the lock's path, fn swallowing", with(ctx, false, "c2"), s, swallowing, store.ErrLongerSession)
	check("the lock's path, no head", with(ctx, false, "c1"), s, bump, nil)
	check("another replica's write", with(ctx, false), other, bump, nil) // s's held row is stale now
	check("a stale held row, a head", with(ctx, true, "c2"), s, bump, store.ErrLongerSession)
	check("a stale held row, no head", with(ctx, true, "c1"), s, bump, nil)
}

// TestHeldRowDroppedOnAStaleRead: a read of the stored row outside a
// transaction that shows the held row stale (another replica's write, a
// delete) drops it, so a caller that failed on it before any transaction
// (the gateway's match, whose client edits were planned on it) does not
// take it again; a read of the held row itself keeps it. Fails without
// heldRows.seen (HeldSession still answers the stale row).
func TestHeldRowDroppedOnAStaleRead(t *testing.T) {
	_, s, other := twoReplicas(t)
	heldSession(t, s)
	held := func() int64 {
		row, ok := s.HeldSession("t", "s")
		if !ok {
			return -1
		}
		return row.Version
	}
	v := held()
	if v < 0 {
		t.Fatal("no held row")
	}
	if _, err := s.GetSession(t.Context(), "t", "s"); err != nil || held() != v {
		t.Fatalf("a read of the held row itself: held version %d, want %d (%v)", held(), v, err)
	}
	if _, _, err := s.FindHistoryAndSession(t.Context(), "t", []string{"cx"}, 8, "s"); err != nil || held() != v {
		t.Fatalf("FindHistoryAndSession of the held row itself: held version %d, want %d (%v)", held(), v, err)
	}
	bumpOn := func(st *postgres.Store) {
		t.Helper()
		ctx := store.WithReadAhead(t.Context(), store.ReadAhead{OpenToolCalls: true, PreparedView: true}) // held once committed
		if err := st.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
			row, err := tx.GetSession(ctx, "t", "s")
			if err != nil {
				return err
			}
			row.Version++
			return tx.UpdateSession(ctx, &row)
		}); err != nil {
			t.Fatal(err)
		}
	}
	bumpOn(other)
	if _, err := s.GetSession(t.Context(), "t", "s"); err != nil || held() != -1 {
		t.Errorf("a read after another replica's write: held version %d, want none (%v)", held(), err)
	}
	bumpOn(s) // held again
	if held() < 0 {
		t.Fatal("no held row after s's write")
	}
	bumpOn(other)
	if _, _, err := s.FindHistoryAndSession(t.Context(), "t", []string{"cx"}, 8, "s"); err != nil || held() != -1 {
		t.Errorf("FindHistoryAndSession after another replica's write: held version %d, want none (%v)", held(), err)
	}
	bumpOn(s)
	if err := other.InTx(t.Context(), func(ctx context.Context, tx store.Tx) error { return tx.DeleteSession(ctx, "t", "s") }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetSession(t.Context(), "t", "s"); !errors.Is(err, store.ErrNotFound) || held() != -1 {
		t.Errorf("a read after another replica's delete: held version %d, want none (%v)", held(), err)
	}
}
