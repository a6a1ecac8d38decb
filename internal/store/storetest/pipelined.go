package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// testPipelined: a store.Pipelined transaction, whose writes PostgreSQL
// sends late (with its next read or its commit), keeps a transaction's
// meaning: a read sees every write before it, a transaction that only
// writes commits them all, and a write's error fails the transaction with
// its sentinel and stores nothing of it.
func testPipelined(t *testing.T, s store.Store) {
	ctx := store.Pipelined(t.Context())
	create(t, s, session("t", "s", epoch))
	msgs := sampleMessages()
	entries := make([]store.ViewEntry, len(msgs))
	for i, m := range msgs {
		entries[i] = store.ViewEntry{Ord: m.Position, MessageID: m.ID}
	}
	err := s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		sess, err := tx.GetSession(ctx, "t", "s")
		if err != nil {
			return err
		}
		if err := tx.InsertMessages(ctx, "t", "s", msgs); err != nil {
			return err
		}
		if err := tx.AppendView(ctx, "t", "s", entries); err != nil {
			return err
		}
		sess.Version, sess.ActiveCount, sess.LogCount = 2, int64(len(msgs)), int64(len(msgs))
		if err := tx.UpdateSession(ctx, &sess); err != nil {
			return err
		}
		if n, err := tx.LogBytes(ctx, "t"); err != nil || n == 0 {
			t.Errorf("log bytes after the insert, in the transaction: %d, %v", n, err)
		}
		view, err := tx.ViewMessages(ctx, "t", "s")
		if err != nil || len(view) != len(msgs) {
			t.Errorf("view read after the writes, in the transaction: %d messages, %v", len(view), err)
		}
		if again, err := tx.GetSession(ctx, "t", "s"); err != nil || again.Version != 2 {
			t.Errorf("session read after its update, in the transaction: version %d, %v", again.Version, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetSession(t.Context(), "t", "s"); err != nil || got.Version != 2 || got.ActiveCount != int64(len(msgs)) {
		t.Errorf("committed session: %+v, %v", got, err)
	}

	// Writes and no read after them: all go with the commit.
	err = s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		if err := tx.PutIdempotency(ctx, "t", "s", store.Idempotency{Key: "k", RequestHash: "h", Response: []byte("{}")}); err != nil {
			return err
		}
		return tx.AddLedger(ctx, "t", "s", store.LedgerCalls, store.LedgerTotals{Calls: 1, Input: 10})
	})
	if err != nil {
		t.Fatal(err)
	}
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		rec, err := tx.GetIdempotency(ctx, "t", "s", "k")
		if err != nil || rec.RequestHash != "h" {
			t.Errorf("a write-only pipelined transaction did not commit its key: %+v, %v", rec, err)
		}
		return nil
	})
	if l, err := s.GetLedger(t.Context(), "t", "s"); err != nil || l.Calls.Calls != 1 {
		t.Errorf("a write-only pipelined transaction did not commit its ledger: %+v, %v", l, err)
	}

	// A write that fails: the transaction fails with its sentinel, from
	// the next read or from the commit, and stores nothing.
	more := []chat.Message{msgs[0]}
	more[0].ID, more[0].Position = "m-late", 100
	err = s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		if err := tx.InsertMessages(ctx, "t", "s", more); err != nil {
			return err
		}
		gone := session("t", "gone", epoch)
		return tx.UpdateSession(ctx, gone)
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("update of a missing session, pipelined: %v, want ErrNotFound", err)
	}
	err = s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		if err := tx.InsertMessages(ctx, "t", "s", more); err != nil {
			return err
		}
		if err := tx.PutIdempotency(ctx, "t", "s", store.Idempotency{Key: "k", RequestHash: "h2", Response: []byte("{}")}); err != nil {
			return err
		}
		_, err := tx.ViewMessages(ctx, "t", "s")
		return err
	})
	if !errors.Is(err, store.ErrAlreadyExists) {
		t.Errorf("a key stored twice, pipelined, then a read: %v, want ErrAlreadyExists", err)
	}
	if log, err := s.LogMessages(t.Context(), "t", "s", 0, 100); err != nil || len(log) != len(msgs) {
		t.Errorf("failed pipelined transactions stored messages: %d in the log, want %d (%v)", len(log), len(msgs), err)
	}

	// The calibration read in a transaction (its lock and its row, with
	// the writes queued before them) sees the transaction's own queued
	// write of it, and the write queued last commits.
	cal := store.Calibration{Model: "m", Ratio: 1.5, Samples: 1, UpdatedAt: epoch}
	err = s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		if err := tx.AddLedger(ctx, "t", "s", store.LedgerCalls, store.LedgerTotals{Calls: 1, Input: 10}); err != nil {
			return err
		}
		if _, err := tx.GetCalibration(ctx, "t", "m"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a calibration not stored yet, after a queued write: %v, want ErrNotFound", err)
		}
		if err := tx.PutCalibration(ctx, "t", cal); err != nil {
			return err
		}
		if got, err := tx.GetCalibration(ctx, "t", "m"); err != nil || got.Ratio != cal.Ratio {
			t.Errorf("the calibration after its queued write, in the transaction: %+v, %v", got, err)
		}
		cal.Samples = 2
		return tx.PutCalibration(ctx, "t", cal)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetCalibration(t.Context(), "t", "m"); err != nil || got.Samples != 2 {
		t.Errorf("a calibration written last in a pipelined transaction: %+v, %v; want 2 samples", got, err)
	}
	// A queued write's error is the calibration read's.
	err = s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		if err := tx.PutIdempotency(ctx, "t", "s", store.Idempotency{Key: "k", RequestHash: "h3", Response: []byte("{}")}); err != nil {
			return err
		}
		_, err := tx.GetCalibration(ctx, "t", "m")
		return err
	})
	if !errors.Is(err, store.ErrAlreadyExists) {
		t.Errorf("a key stored twice, pipelined, then the calibration read: %v, want ErrAlreadyExists", err)
	}
}
