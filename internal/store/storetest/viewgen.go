package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// activeIDs reads the active view's ids as a reader outside any
// transaction does.
func activeIDs(t *testing.T, s store.Store, tenant, id string) []string {
	t.Helper()
	msgs, _, err := s.ActiveMessages(t.Context(), tenant, id, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range msgs {
		ids = append(ids, m.ID)
	}
	return ids
}

// testViewGenerations checks view rewrites by generation: a view staged
// in transactions of its own is invisible until FlipView makes it the
// session's (which checks it is whole), appends go to the current one,
// ReplaceView leaves the old rows invisible, and SweepViews deletes them in
// batches of at most its limit, never the current view's.
func testViewGenerations(t *testing.T, s store.Store) {
	create(t, s, session("t1", "a", epoch))
	var msgs []chat.Message
	for i := range 6 {
		msgs = append(msgs, sized(fmt.Sprint("m", i+1), int64(i+1), "hi", epoch))
	}
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.InsertMessages(ctx, "t1", "a", msgs); err != nil {
			return err
		}
		return tx.AppendView(ctx, "t1", "a", store.Entries([]string{"m1", "m2", "m3", "m4", "m5"}, 0))
	})
	want := fmt.Sprint([]string{"m1", "m2", "m3", "m4", "m5"})
	// A staged generation, two batches in transactions of their own, is
	// nobody's view yet.
	gen := store.NewViewGen()
	staged := []string{"m1", "m3", "m5"}
	for _, b := range [][2]int{{0, 2}, {2, 3}} {
		mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
			return tx.StageView(ctx, "t1", "a", gen, store.Entries(staged[b[0]:b[1]], int64(b[0])))
		})
		if got := fmt.Sprint(activeIDs(t, s, "t1", "a")); got != want {
			t.Fatalf("a reader sees %s while a view is staged; want %s", got, want)
		}
	}
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		view, err := tx.ViewMessages(ctx, "t1", "a")
		if err != nil || len(view) != 5 {
			return fmt.Errorf("ViewMessages while staged = %d messages, %v", len(view), err)
		}
		return nil
	})
	// A flip checks the generation is whole; a failed one changes nothing.
	if err := inTx(t, s, func(ctx context.Context, tx store.Tx) error { return tx.FlipView(ctx, "t1", "a", gen, 4) }); !errors.Is(err, store.ErrVersionConflict) {
		t.Fatalf("FlipView of an incomplete generation: %v; want ErrVersionConflict", err)
	}
	boom := errors.New("boom")
	if err := inTx(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.FlipView(ctx, "t1", "a", gen, 3); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if got := fmt.Sprint(activeIDs(t, s, "t1", "a")); got != want {
		t.Fatalf("after a rolled-back flip: %s; want %s", got, want)
	}
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.FlipView(ctx, "t1", "a", gen, 3); err != nil {
			return err
		}
		return tx.AppendView(ctx, "t1", "a", store.Entries([]string{"m6"}, 3))
	})
	if got, want := fmt.Sprint(activeIDs(t, s, "t1", "a")), fmt.Sprint([]string{"m1", "m3", "m5", "m6"}); got != want {
		t.Fatalf("after the flip and an append: %s; want %s", got, want)
	}
	// The old generation's five rows go in batches of two; the view stays.
	for _, wantN := range []int{2, 2, 1, 0} {
		n, err := s.SweepViews(t.Context(), "t1", "a", 2)
		if err != nil || n != wantN {
			t.Fatalf("SweepViews = %d, %v; want %d", n, err, wantN)
		}
	}
	// ReplaceView is a flip too: the rows it replaced wait for a sweep.
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error { return tx.ReplaceView(ctx, "t1", "a", []string{"m2"}) })
	if got := fmt.Sprint(activeIDs(t, s, "t1", "a")); got != "[m2]" {
		t.Fatalf("after ReplaceView: %s", got)
	}
	if n, err := s.SweepViews(t.Context(), "t1", "a", 100); err != nil || n != 4 {
		t.Fatalf("SweepViews after ReplaceView = %d, %v; want the 4 replaced rows", n, err)
	}
	if got := fmt.Sprint(activeIDs(t, s, "t1", "a")); got != "[m2]" {
		t.Fatalf("after the sweep: %s", got)
	}
}

// testSweepDuringFlip checks that a sweep running while a flip is in an
// open transaction never deletes the generation being flipped: the sweep
// reads the current generation before the flip commits, so deleting what
// was not current then would empty the view the flip makes the session's.
func testSweepDuringFlip(t *testing.T, s store.Store) {
	sweepDuringFlip(t, s, func(int64) error {
		_, err := s.SweepViews(context.Background(), "t1", "a", 100)
		return err
	})
}

// testDropDuringFlip is testSweepDuringFlip for retention's sweep of
// abandoned generations: DropViewGen of the generation a flip in an open
// transaction makes current leaves it alone (the sweep may have listed it
// stray before the flip began).
func testDropDuringFlip(t *testing.T, s store.Store) {
	sweepDuringFlip(t, s, func(gen int64) error {
		_, err := s.DropViewGen(context.Background(), store.ViewGen{Tenant: "t1", SessionID: "a", Gen: gen}, 100)
		return err
	})
}

// sweepDuringFlip runs sweep while a flip of a staged generation (passed
// to sweep) is in an open transaction, and checks the flipped view.
func sweepDuringFlip(t *testing.T, s store.Store, sweep func(gen int64) error) {
	create(t, s, session("t1", "a", epoch))
	ids := []string{"m1", "m2", "m3"}
	var msgs []chat.Message
	for i, id := range ids {
		msgs = append(msgs, sized(id, int64(i+1), "hi", epoch))
	}
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.InsertMessages(ctx, "t1", "a", msgs); err != nil {
			return err
		}
		return tx.AppendView(ctx, "t1", "a", store.Entries(ids[:1], 0))
	})
	gen := store.NewViewGen()
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.StageView(ctx, "t1", "a", gen, store.Entries(ids, 0))
	})
	flipped, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- s.InTx(context.Background(), func(ctx context.Context, tx store.Tx) error {
			if _, err := tx.GetSession(ctx, "t1", "a"); err != nil { // the session's row, as every rewrite holds it
				return err
			}
			if err := tx.FlipView(ctx, "t1", "a", gen, len(ids)); err != nil {
				return err
			}
			close(flipped)
			<-release
			return nil
		})
	}()
	select {
	case <-flipped:
	case err := <-done:
		t.Fatal(err)
	}
	swept := make(chan error, 1)
	go func() { swept <- sweep(gen) }()
	// The sweep either waits for the flip or sweeps what is not its
	// generation; give it time to do the wrong thing.
	select {
	case err := <-swept:
		swept <- err
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-swept; err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(activeIDs(t, s, "t1", "a")), fmt.Sprint(ids); got != want {
		t.Fatalf("the view after a sweep ran during its flip: %s; want %s", got, want)
	}
}
