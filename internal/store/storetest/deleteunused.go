package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// testDeleteUnusedSession: DeleteUnusedSession deletes a session only as
// it was created (version 1, empty log, that creation time), in one
// statement: never one that was written to, moved on, or made again.
func testDeleteUnusedSession(t *testing.T, s store.Store) {
	ctx := t.Context()
	del := func(id string, created time.Time) bool {
		t.Helper()
		var deleted bool
		mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
			var err error
			deleted, err = tx.DeleteUnusedSession(ctx, "t", id, created)
			return err
		})
		return deleted
	}
	create(t, s, session("t", "fresh", epoch))
	if del("fresh", epoch.Add(time.Microsecond)) {
		t.Errorf("deleted a session made at another time (made again by someone else)")
	}
	if !del("fresh", epoch) {
		t.Errorf("did not delete a session as it was created")
	}
	if _, err := s.GetSession(ctx, "t", "fresh"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after the delete: %v", err)
	}
	if del("fresh", epoch) {
		t.Errorf("deleted a deleted session again")
	}
	// Written to: a message in its log.
	create(t, s, session("t", "used", epoch))
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		cur, err := tx.GetSession(ctx, "t", "used")
		if err != nil {
			return err
		}
		m := chat.Message{ID: "m1", Position: 1, Role: chat.RoleUser, Kind: chat.KindNormal, Parts: []chat.Part{{Type: chat.PartText, Text: "hi"}}, Tokens: 1, CreatedAt: epoch}
		if err := tx.InsertMessages(ctx, "t", "used", []chat.Message{m}); err != nil {
			return err
		}
		cur.LogCount, cur.ActiveCount = 1, 1
		return tx.UpdateSession(ctx, &cur)
	})
	// Moved on: a report bumped its version.
	create(t, s, session("t", "moved", epoch))
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		cur, err := tx.GetSession(ctx, "t", "moved")
		if err != nil {
			return err
		}
		cur.Version = 2
		return tx.UpdateSession(ctx, &cur)
	})
	for _, id := range []string{"used", "moved", "missing"} {
		if del(id, epoch) {
			t.Errorf("deleted session %q", id)
		}
	}
	for _, id := range []string{"used", "moved"} {
		if _, err := s.GetSession(ctx, "t", id); err != nil {
			t.Errorf("session %q: %v", id, err)
		}
	}
}

// testDeleteSessionAt: DeleteSessionAt deletes a session only at the
// version and creation time given (nothing written since), in one
// statement: never one that moved on or was made again.
func testDeleteSessionAt(t *testing.T, s store.Store) {
	ctx := t.Context()
	del := func(id string, created time.Time, version int64) bool {
		t.Helper()
		var deleted bool
		mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
			var err error
			deleted, err = tx.DeleteSessionAt(ctx, "t", id, created, version)
			return err
		})
		return deleted
	}
	// Written to once (version 2): the caller's own append.
	create(t, s, session("t", "s", epoch))
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		cur, err := tx.GetSession(ctx, "t", "s")
		if err != nil {
			return err
		}
		cur.Version = 2
		return tx.UpdateSession(ctx, &cur)
	})
	if del("s", epoch, 1) {
		t.Errorf("deleted a session that moved past the version given")
	}
	if del("s", epoch.Add(time.Microsecond), 2) {
		t.Errorf("deleted a session made at another time (made again by someone else)")
	}
	if del("missing", epoch, 2) {
		t.Errorf("deleted a missing session")
	}
	if _, err := s.GetSession(ctx, "t", "s"); err != nil {
		t.Fatalf("the session after refused deletes: %v", err)
	}
	if !del("s", epoch, 2) {
		t.Errorf("did not delete the session at its version")
	}
	if _, err := s.GetSession(ctx, "t", "s"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after the delete: %v", err)
	}
	if del("s", epoch, 2) || del("s", epoch, 3) {
		t.Errorf("deleted a deleted session again")
	}
}

// testDeleteSessionAtKeepsBilledWork: DeleteSessionAt never deletes a
// session with a ledger row (a summarizer's call billed to it) or a
// compaction job (one scheduled or running), even at the version given:
// its compaction and that cost are work its client's retry starts from,
// and a running job's overhead would find no session (issue 29).
func testDeleteSessionAtKeepsBilledWork(t *testing.T, s store.Store) {
	create(t, s, session("t", "billed", epoch))
	create(t, s, session("t", "queued", epoch))
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.AddLedger(ctx, "t", "billed", store.LedgerOverhead, store.LedgerTotals{Calls: 1, Input: 50, Output: 20})
	})
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.PutJob(ctx, job("t", "queued", "job1", store.JobQueued, epoch))
	})
	for _, id := range []string{"billed", "queued"} {
		var deleted bool
		mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
			var err error
			deleted, err = tx.DeleteSessionAt(ctx, "t", id, epoch, 1)
			return err
		})
		if deleted {
			t.Errorf("%s: deleted a session with billed or scheduled work", id)
		}
		if _, err := s.GetSession(t.Context(), "t", id); err != nil {
			t.Errorf("%s after the refused delete: %v", id, err)
		}
	}
}
