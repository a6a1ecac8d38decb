package storetest

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"

	"github.com/contextd/contextd/internal/store"
)

// testLedger checks that ledger totals are the sum of what was added, per
// kind and session, including under concurrent adds (atomic increments), and
// that a failed transaction adds nothing.
func testLedger(t *testing.T, s store.Store) {
	create(t, s, session("t1", "a", epoch))
	create(t, s, session("t1", "b", epoch))
	empty, err := s.GetLedger(t.Context(), "t1", "a")
	if err != nil || empty != (store.Ledger{}) {
		t.Fatalf("new session's ledger = %+v, %v; want zero", empty, err)
	}
	const workers, each = 8, 25
	var want store.LedgerTotals
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				l := store.LedgerTotals{Calls: 1, Input: int64(100 + w), CacheRead: int64(1000 * i), CacheWrite: int64(w * i),
					Output: 7, CostNanoUSD: int64(123456 + i), Unpriced: int64(i % 2)}
				if err := s.InTx(context.Background(), func(ctx context.Context, tx store.Tx) error {
					return tx.AddLedger(ctx, "t1", "a", store.LedgerCalls, l)
				}); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				want = want.Add(l)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent AddLedger: %v", err)
	}
	over := store.LedgerTotals{Calls: 1, Input: 50, Output: 20, CostNanoUSD: 99}
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.AddLedger(ctx, "t1", "a", store.LedgerOverhead, over)
	})
	boom := errors.New("boom")
	if err := inTx(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.AddLedger(ctx, "t1", "a", store.LedgerOverhead, over); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("rolled-back add: %v", err)
	}
	// The estimated part of the calls is a kind of its own.
	est := store.LedgerTotals{Calls: 1, Input: 30, Output: 3}
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.AddLedger(ctx, "t1", "a", store.LedgerEstimated, est)
	})
	got, err := s.GetLedger(t.Context(), "t1", "a")
	if err != nil {
		t.Fatal(err)
	}
	if want.Calls != workers*each || got.Calls != want || got.Overhead != over || got.Estimated != est {
		t.Fatalf("ledger = %+v\nwant calls %+v, overhead %+v, estimated %+v", got, want, over, est)
	}
	if other, _ := s.GetLedger(t.Context(), "t1", "b"); other != (store.Ledger{}) {
		t.Errorf("another session's ledger changed: %+v", other)
	}
	if other, _ := s.GetLedger(t.Context(), "t2", "a"); other != (store.Ledger{}) {
		t.Errorf("another tenant sees the ledger: %+v", other)
	}
}

// testPreparedView checks the round trip of what PrepareContext returned.
func testPreparedView(t *testing.T, s store.Store) {
	create(t, s, session("t1", "a", epoch))
	if err := inTx(t, s, func(ctx context.Context, tx store.Tx) error {
		_, err := tx.GetPreparedView(ctx, "t1", "a")
		return err
	}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("no prepared view yet: got %v, want ErrNotFound", err)
	}
	for _, v := range []store.PreparedView{
		{Fixed: "f1", IDs: []string{"msg_1", "sum_2_1", "msg_30", "msg_31", "msg_32", "ph_2_2", "msg_34"}, ViewToken: "djE6MTox"},
		{Fixed: "f2", IDs: nil},
		{Fixed: "f3", IDs: []string{"msg_1"}, ViewToken: "djE6Mjoy"},
	} {
		mustTx(t, s, func(ctx context.Context, tx store.Tx) error { return tx.PutPreparedView(ctx, "t1", "a", v) })
		var got store.PreparedView
		mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
			var err error
			got, err = tx.GetPreparedView(ctx, "t1", "a")
			return err
		})
		if !reflect.DeepEqual(got, v) {
			t.Errorf("prepared view = %+v, want %+v", got, v)
		}
	}
}

// LedgerSurvivesReopen adds to a ledger through one store, closes it, and
// reads the totals back through a second store opened on the same database.
func LedgerSurvivesReopen(t *testing.T, open func() store.Store) {
	s := open()
	create(t, s, session("t1", "a", epoch))
	l := store.LedgerTotals{Calls: 3, Input: 10, CacheRead: 20, CacheWrite: 30, Output: 40, CostNanoUSD: 50, Unpriced: 1}
	for range 2 {
		mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
			return tx.AddLedger(ctx, "t1", "a", store.LedgerCalls, l)
		})
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open()
	defer s.Close()
	got, err := s.GetLedger(t.Context(), "t1", "a")
	if err != nil || got.Calls != l.Add(l) {
		t.Fatalf("after reopening: %+v, %v; want %+v", got, err, l.Add(l))
	}
}

// testLedgerSaturates adds the largest totals one call can bring until
// they pass store.LedgerCap: every total stops at the cap, reads back
// without error, and never wraps.
func testLedgerSaturates(t *testing.T, s store.Store) {
	create(t, s, session("t1", "big", epoch))
	huge := store.LedgerTotals{Calls: store.LedgerCap / 3, Input: store.LedgerCap / 3, CacheRead: store.LedgerCap / 3,
		CacheWrite: store.LedgerCap / 3, Output: store.LedgerCap / 3, CostNanoUSD: store.LedgerCap / 3, Unpriced: store.LedgerCap / 3}
	for range 5 {
		if err := s.InTx(t.Context(), func(ctx context.Context, tx store.Tx) error {
			return tx.AddLedger(ctx, "t1", "big", store.LedgerCalls, huge)
		}); err != nil {
			t.Fatalf("add: %v", err)
		}
	}
	got, err := s.GetLedger(t.Context(), "t1", "big")
	if err != nil {
		t.Fatalf("read a saturated ledger: %v", err)
	}
	c := store.LedgerCap
	if want := (store.LedgerTotals{Calls: c, Input: c, CacheRead: c, CacheWrite: c, Output: c, CostNanoUSD: c, Unpriced: c}); got.Calls != want {
		t.Fatalf("saturated ledger = %+v, want every total at %d", got.Calls, c)
	}
}
