package storetest

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/contextd/contextd/internal/store"
)

// testReadAhead: a transaction marked store.ReadAhead (whose reads
// PostgreSQL sends with the session's lock) reads what any transaction
// reads: the locked session's open tool calls and hints row as stored,
// what it wrote itself since the lock (a write drops what was read ahead),
// another session's or another tenant's rows, never the ones read ahead,
// and nothing for a session that is not there.
func testReadAhead(t *testing.T, s store.Store) {
	for _, k := range [][2]string{{"t", "s"}, {"t", "o"}, {"u", "s"}} {
		create(t, s, session(k[0], k[1], epoch))
	}
	pv := store.PreparedView{Fixed: "f1", IDs: []string{"msg_1", "msg_2"}, ViewToken: "tok1"}
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.PutToolCalls(ctx, "t", "s", []store.ToolCall{{CallID: "c1", Position: 1}, {CallID: "c0", Position: 1, ResultPosition: 2}}); err != nil {
			return err
		}
		if err := tx.PutToolCalls(ctx, "t", "o", []store.ToolCall{{CallID: "o1", Position: 3}}); err != nil {
			return err
		}
		if err := tx.PutToolCalls(ctx, "u", "s", []store.ToolCall{{CallID: "u1", Position: 4}}); err != nil {
			return err
		}
		return tx.PutPreparedView(ctx, "t", "s", pv)
	})
	ids := func(calls []store.ToolCall, err error) []string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range calls {
			out = append(out, c.CallID)
		}
		return out
	}
	both := store.ReadAhead{OpenToolCalls: true, PreparedView: true}
	for _, pipelined := range []bool{false, true} {
		ctx := store.WithReadAhead(t.Context(), both)
		if pipelined {
			ctx = store.Pipelined(ctx)
		}
		run := func(fn func(ctx context.Context, tx store.Tx) error) error { return s.InTx(ctx, fn) }
		if err := run(func(ctx context.Context, tx store.Tx) error {
			if _, err := tx.GetSession(ctx, "t", "s"); err != nil {
				return err
			}
			// Others' rows first: never the ones read ahead.
			if got := ids(tx.OpenToolCalls(ctx, "u", "s")); !reflect.DeepEqual(got, []string{"u1"}) {
				t.Errorf("pipelined %v: another tenant's open calls after the lock = %v, want [u1]", pipelined, got)
			}
			if got := ids(tx.OpenToolCalls(ctx, "t", "o")); !reflect.DeepEqual(got, []string{"o1"}) {
				t.Errorf("pipelined %v: another session's open calls after the lock = %v, want [o1]", pipelined, got)
			}
			if _, err := tx.GetPreparedView(ctx, "t", "o"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("pipelined %v: another session's hints row: %v, want ErrNotFound", pipelined, err)
			}
			// A write of a table no read ahead reads keeps them.
			if err := tx.AddLedger(ctx, "t", "s", store.LedgerCalls, store.LedgerTotals{Calls: 1, Input: 1}); err != nil {
				return err
			}
			if got := ids(tx.OpenToolCalls(ctx, "t", "s")); !reflect.DeepEqual(got, []string{"c1"}) {
				t.Errorf("pipelined %v: open calls = %v, want [c1]", pipelined, got)
			}
			if got, err := tx.GetPreparedView(ctx, "t", "s"); err != nil || !reflect.DeepEqual(got, pv) {
				t.Errorf("pipelined %v: hints row = %+v, %v; want %+v", pipelined, got, err, pv)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		// What the transaction writes after the lock, its next read sees
		// (each write alone: one drops what was read ahead of both).
		errRollBack := errors.New("roll back")
		writes := []func(ctx context.Context, tx store.Tx) error{
			func(ctx context.Context, tx store.Tx) error {
				next := store.PreparedView{Fixed: "f2", IDs: []string{"msg_3"}, ViewToken: "tok2"}
				if err := tx.PutPreparedView(ctx, "t", "s", next); err != nil {
					return err
				}
				if got, err := tx.GetPreparedView(ctx, "t", "s"); err != nil || !reflect.DeepEqual(got, next) {
					t.Errorf("pipelined %v: hints row after it was written in the transaction = %+v, %v; want %+v", pipelined, got, err, next)
				}
				return nil
			},
			func(ctx context.Context, tx store.Tx) error {
				if err := tx.PutToolCalls(ctx, "t", "s", []store.ToolCall{{CallID: "c2", Position: 5}}); err != nil {
					return err
				}
				if got := ids(tx.OpenToolCalls(ctx, "t", "s")); !reflect.DeepEqual(got, []string{"c1", "c2"}) {
					t.Errorf("pipelined %v: open calls after a call was stored in the transaction = %v, want [c1 c2]", pipelined, got)
				}
				return nil
			},
		}
		for _, write := range writes {
			if err := run(func(ctx context.Context, tx store.Tx) error {
				if _, err := tx.GetSession(ctx, "t", "s"); err != nil {
					return err
				}
				if err := write(ctx, tx); err != nil {
					return err
				}
				return errRollBack
			}); !errors.Is(err, errRollBack) {
				t.Fatal(err)
			}
		}
		// A session that is not there: not found, and nothing read ahead.
		if err := run(func(ctx context.Context, tx store.Tx) error {
			if _, err := tx.GetSession(ctx, "t", "gone"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("pipelined %v: a missing session: %v, want ErrNotFound", pipelined, err)
			}
			if got := ids(tx.OpenToolCalls(ctx, "t", "gone")); len(got) != 0 {
				t.Errorf("pipelined %v: a missing session's open calls = %v", pipelined, got)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}
