package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// testSessionTools: an update of a session's row writes its tools as
// given, whether they are the tools it holds (a store may then leave the
// column as it is: PostgreSQL's heldTools), new ones, or, within one
// transaction, new ones and then the held ones again (the last update's
// must be what is stored), pipelined or not; a failed transaction keeps
// the row's tools.
func testSessionTools(t *testing.T, s store.Store) {
	held := []chat.Tool{{Name: "read", Description: "Read a file.", Parameters: `{"type":"object"}`}}
	other := []chat.Tool{{Name: "write", Description: "Write a file.", Parameters: `{"type":"object"}`}}
	errRollback := errors.New("rolled back")
	for _, pipelined := range []bool{false, true} {
		ctx := t.Context()
		if pipelined {
			ctx = store.Pipelined(ctx)
		}
		id := map[bool]string{false: "plain", true: "pipelined"}[pipelined]
		sess := session("t", id, epoch)
		sess.Tools = held
		create(t, s, sess)
		update := func(tools ...[]chat.Tool) error {
			return s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
				row, err := tx.GetSession(ctx, "t", id)
				if err != nil {
					return err
				}
				for _, ts := range tools {
					row.Version++
					row.Tools = ts
					if err := tx.UpdateSession(ctx, &row); err != nil {
						return err
					}
				}
				return nil
			})
		}
		check := func(step string, want []chat.Tool, version int64) {
			t.Helper()
			row, err := s.GetSession(t.Context(), "t", id)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(row.Tools, want) || row.Version != version {
				t.Errorf("pipelined %v, %s: tools %+v at version %d, want %+v at %d", pipelined, step, row.Tools, row.Version, want, version)
			}
		}
		if err := update(held); err != nil {
			t.Fatal(err)
		}
		check("the same tools", held, 2)
		if err := update(other); err != nil {
			t.Fatal(err)
		}
		check("new tools", other, 3)
		if err := update(held, other); err != nil {
			t.Fatal(err)
		}
		check("other tools, then the stored ones again", other, 5)
		if err := update(held, held); err != nil {
			t.Fatal(err)
		}
		check("the held tools again, twice", held, 7)
		err := s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
			row, err := tx.GetSession(ctx, "t", id)
			if err != nil {
				return err
			}
			row.Version++
			row.Tools = other
			if err := tx.UpdateSession(ctx, &row); err != nil {
				return err
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			t.Fatalf("pipelined %v: %v", pipelined, err)
		}
		check("a failed transaction", held, 7)
	}
}
