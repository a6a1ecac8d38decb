package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/retention"
	"github.com/contextd/contextd/internal/store"
)

// viewOf makes session id of tenant t1 with messages m1..m3 in its view
// (generation 0).
func viewOf(t *testing.T, s store.Store, id string) []string {
	t.Helper()
	create(t, s, session("t1", id, epoch))
	ids := []string{"m1", "m2", "m3"}
	var msgs []chat.Message
	for i, mid := range ids {
		msgs = append(msgs, sized(mid, int64(i+1), "hi", epoch))
	}
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.InsertMessages(ctx, "t1", id, msgs); err != nil {
			return err
		}
		return tx.AppendView(ctx, "t1", id, store.Entries(ids, 0))
	})
	return ids
}

// stage writes ids as generation gen of session id, as a rewrite does
// before its flip.
func stage(t *testing.T, s store.Store, id string, gen int64, ids []string) {
	t.Helper()
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.StageView(ctx, "t1", id, gen, store.Entries(ids, 0))
	})
}

func strays(t *testing.T, s store.Store) []store.ViewGen {
	t.Helper()
	gens, next, err := s.StrayViewGens(t.Context(), store.StrayCursor{}, 100)
	if err != nil || next != (store.StrayCursor{}) {
		t.Fatalf("StrayViewGens of every session: cursor %v, %v; want it at the end", next, err)
	}
	return gens
}

// testStrayViewGens checks the listing and deletion of view generations
// that are not their session's current one: a staged generation is
// listed, the current one never; DropViewGen deletes at most its limit a
// call and never the current generation.
func testStrayViewGens(t *testing.T, s store.Store) {
	ids := viewOf(t, s, "a")
	if g := strays(t, s); len(g) != 0 {
		t.Fatalf("stray generations of a session with only its view: %v", g)
	}
	gen := store.NewViewGen()
	stage(t, s, "a", gen, ids)
	want := []store.ViewGen{{Tenant: "t1", SessionID: "a", Gen: gen}}
	if g := strays(t, s); !slices.Equal(g, want) {
		t.Fatalf("stray generations = %v; want %v", g, want)
	}
	if n, err := s.DropViewGen(t.Context(), store.ViewGen{Tenant: "t1", SessionID: "a", Gen: 0}, 100); err != nil || n != 0 {
		t.Fatalf("DropViewGen of the current generation = %d, %v; want 0", n, err)
	}
	for _, wantN := range []int{2, 1, 0} {
		if n, err := s.DropViewGen(t.Context(), want[0], 2); err != nil || n != wantN {
			t.Fatalf("DropViewGen = %d, %v; want %d", n, err, wantN)
		}
	}
	if g := strays(t, s); len(g) != 0 {
		t.Fatalf("stray generations after the drop: %v", g)
	}
	if got := fmt.Sprint(activeIDs(t, s, "t1", "a")); got != fmt.Sprint(ids) {
		t.Fatalf("the view after the drop: %s; want %v", got, ids)
	}
}

// testAbandonedStagingSwept: a rewrite killed between its staging and its
// flip leaves the staged rows; retention's sweep deletes them once it has
// seen them stray for its age, and leaves alone a generation a live
// rewrite is staging (seen for less than the age): that rewrite's flip
// still succeeds. Before, nothing deleted the rows of a session never
// rewritten again.
func testAbandonedStagingSwept(t *testing.T, s store.Store) {
	ctx := t.Context()
	ids := viewOf(t, s, "a")
	viewOf(t, s, "b")
	abandoned := store.NewViewGen()
	stage(t, s, "a", abandoned, ids[:2]) // the replica died here
	sweep := retention.Strays{Age: time.Minute}
	t0 := epoch
	for _, at := range []time.Duration{0, 30 * time.Second} {
		if gens, rows, err := sweep.Sweep(ctx, s, t0.Add(at)); err != nil || gens != 0 || rows != 0 {
			t.Fatalf("sweep at +%v: %d generations, %d rows, %v; want nothing yet", at, gens, rows, err)
		}
	}
	live := store.NewViewGen()
	stage(t, s, "b", live, ids[2:]) // a rewrite staging now
	if gens, rows, err := sweep.Sweep(ctx, s, t0.Add(61*time.Second)); err != nil || gens != 1 || rows != 2 {
		t.Fatalf("sweep at +61s: %d generations, %d rows, %v; want the abandoned one's 2 rows", gens, rows, err)
	}
	want := []store.ViewGen{{Tenant: "t1", SessionID: "b", Gen: live}}
	if g := strays(t, s); !slices.Equal(g, want) {
		t.Fatalf("stray generations after the sweep = %v; want only the live one %v", g, want)
	}
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		if _, err := tx.GetSession(ctx, "t1", "b"); err != nil {
			return err
		}
		return tx.FlipView(ctx, "t1", "b", live, 1)
	})
	if got := fmt.Sprint(activeIDs(t, s, "t1", "b")); got != "[m3]" {
		t.Fatalf("the live rewrite's view after its flip: %s; want [m3]", got)
	}
	if got := fmt.Sprint(activeIDs(t, s, "t1", "a")); got != fmt.Sprint(ids) {
		t.Fatalf("the view of the session whose staging was swept: %s; want %v", got, ids)
	}
}

// testStrayPassesAreBounded: a listing looks at the sessions after its
// cursor, at most as many as it is told, and says where it stopped (zero
// at the end); retention's sweep, told 2 sessions a pass, goes round 5 in
// 3 passes and deletes, a round later, only the generations of the
// sessions each pass looks at. Before, every listing probed every session.
func testStrayPassesAreBounded(t *testing.T, s store.Store) {
	ctx := t.Context()
	names := []string{"a", "b", "c", "d", "e"}
	var want []store.ViewGen
	for _, id := range names {
		ids := viewOf(t, s, id)
		gen := store.NewViewGen()
		stage(t, s, id, gen, ids[:1])
		want = append(want, store.ViewGen{Tenant: "t1", SessionID: id, Gen: gen})
	}
	var cursor store.StrayCursor
	for pass, wantGens := range [][]store.ViewGen{want[:2], want[2:4], want[4:]} {
		gens, next, err := s.StrayViewGens(ctx, cursor, 2)
		if err != nil || !slices.Equal(gens, wantGens) {
			t.Fatalf("pass %d: %v, %v; want %v", pass, gens, err, wantGens)
		}
		wantNext := store.StrayCursor{Tenant: "t1", ID: wantGens[len(wantGens)-1].SessionID}
		if pass == 2 {
			wantNext = store.StrayCursor{}
		}
		if next != wantNext {
			t.Fatalf("pass %d stopped at %v; want %v", pass, next, wantNext)
		}
		cursor = next
	}
	sweep := retention.Strays{Age: time.Minute, Sessions: 2, Batches: 1}
	for range 3 { // a first round: each seen once
		if gens, rows, err := sweep.Sweep(ctx, s, epoch); err != nil || gens != 0 || rows != 0 {
			t.Fatalf("first round: %d generations, %d rows, %v; want nothing yet", gens, rows, err)
		}
	}
	for pass, wantGens := range []int{2, 2, 1} {
		if gens, rows, err := sweep.Sweep(ctx, s, epoch.Add(time.Hour)); err != nil || gens != wantGens || rows != wantGens {
			t.Fatalf("second round, pass %d: %d generations, %d rows, %v; want %d of each", pass, gens, rows, err, wantGens)
		}
	}
	if g := strays(t, s); len(g) != 0 {
		t.Fatalf("stray generations after two rounds: %v", g)
	}
}

// testStrayPassGoesRound: a pass of retention's sweep lists batch after
// batch up to the end of the round, at most Batches of them: told 2
// sessions a listing, one pass goes round 5 sessions, and the next, an
// age later, deletes the generations of all 5; told 2 listings a pass, a
// pass looks at 4 sessions, the next at the fifth (the round's end: it
// stops there, not looking at a session twice). Before, a pass made one
// listing: 5 sessions took 3 passes, and a store of 100,000 sessions took
// 100 hours at the default interval.
func testStrayPassGoesRound(t *testing.T, s store.Store) {
	ctx := t.Context()
	var want []store.ViewGen
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		ids := viewOf(t, s, id)
		gen := store.NewViewGen()
		stage(t, s, id, gen, ids[:1])
		want = append(want, store.ViewGen{Tenant: "t1", SessionID: id, Gen: gen})
	}
	capped := retention.Strays{Age: time.Minute, Sessions: 2, Batches: 2}
	round := retention.Strays{Age: time.Minute, Sessions: 2}
	for _, x := range []*retention.Strays{&capped, &capped, &round} {
		if gens, rows, err := x.Sweep(ctx, s, epoch); err != nil || gens != 0 || rows != 0 {
			t.Fatalf("a first look: %d generations, %d rows, %v; want nothing yet", gens, rows, err)
		}
	}
	if gens, rows, err := capped.Sweep(ctx, s, epoch.Add(time.Hour)); err != nil || gens != 4 || rows != 4 {
		t.Fatalf("a pass of 2 listings of 2 sessions, an age later: %d generations, %d rows, %v; want 4 of each", gens, rows, err)
	}
	if g := strays(t, s); !slices.Equal(g, want[4:]) {
		t.Fatalf("stray generations after a pass of 4 sessions = %v; want %v", g, want[4:])
	}
	if gens, rows, err := round.Sweep(ctx, s, epoch.Add(time.Hour)); err != nil || gens != 1 || rows != 1 {
		t.Fatalf("a pass round 5 sessions, an age later: %d generations, %d rows, %v; want the fifth's", gens, rows, err)
	}
	if g := strays(t, s); len(g) != 0 {
		t.Fatalf("stray generations after a pass round every session: %v", g)
	}
}
