package postgres_test

import (
	"context"
	"testing"

	"github.com/contextd/contextd/internal/store"
)

// TestHeldRowSharedNotOffered: once a held row was found stale (another
// replica wrote the session), HeldSession offers the session's held row no
// more — a guess the next request would take and fail on when replicas
// take turns — until a read of the stored row finds the held row the
// stored one (the other replica stopped writing). Fails without the mark:
// the row held by the run after the failed guard is offered.
func TestHeldRowSharedNotOffered(t *testing.T) {
	_, s, other := twoReplicas(t)
	heldSession(t, s)
	if _, ok := s.HeldSession("t", "s"); !ok {
		t.Fatal("nothing held after the session's write")
	}
	bumpWithHints(t, other)
	bumpWithHints(t, s) // the guard fails; the run again commits and holds its row
	if _, ok := s.HeldSession("t", "s"); ok {
		t.Error("the held row of a session another replica wrote is offered")
	}
	bumpWithHints(t, s) // transactions still start from it (their own last commit)
	if _, err := s.GetSession(t.Context(), "t", "s"); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.HeldSession("t", "s"); !ok {
		t.Error("the held row a read found the stored one is not offered")
	}
}

// bumpWithHints moves session t/s one version on in a held transaction
// that reads the hints row with the lock (so the replica holds it with the
// row from then on).
func bumpWithHints(t *testing.T, st interface {
	InTx(context.Context, func(context.Context, store.Tx) error) error
}) {
	t.Helper()
	err := st.InTx(heldCtx(t.Context()), func(ctx context.Context, tx store.Tx) error {
		row, err := tx.GetSession(ctx, "t", "s")
		if err != nil {
			return err
		}
		if _, err := tx.GetPreparedView(ctx, "t", "s"); err != nil {
			return err
		}
		row.Version++
		return tx.UpdateSession(ctx, &row)
	})
	if err != nil {
		t.Fatal(err)
	}
}
