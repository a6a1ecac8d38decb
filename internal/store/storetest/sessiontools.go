package storetest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// testSessionTools: an update of a session's row writes its tools as
// given, whether they are the tools it holds (a store may then leave the
// column as it is: PostgreSQL's heldTools), new ones, or, within one
// transaction, new ones and then the held ones again (the last update's
// must be what is stored), pipelined or not; a failed transaction keeps
// the row's tools, and the next one that writes the failed one's tools
// stores them.
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
		// What the failed transaction wrote is not held by the next one:
		// the same tools again are written.
		if err := update(other); err != nil {
			t.Fatal(err)
		}
		check("after a failed transaction, its tools again", other, 8)
	}
}

// testSessionToolsOfAnother: the tools a transaction holds are one
// session's: an update of another session (another id, or the same id of
// another tenant) whose tools encode as the held ones writes them,
// whether the held session was locked or inserted.
func testSessionToolsOfAnother(t *testing.T, s store.Store) {
	held := []chat.Tool{{Name: "read", Description: "Read a file.", Parameters: `{"type":"object"}`}}
	theirs := []chat.Tool{{Name: "write", Description: "Write a file.", Parameters: `{"type":"object"}`}}
	for _, pipelined := range []bool{false, true} {
		ctx := t.Context()
		if pipelined {
			ctx = store.Pipelined(ctx)
		}
		for i, tc := range []struct {
			name   string
			tenant string // of the session updated
			hold   func(ctx context.Context, tx store.Tx, id string) error
		}{
			{"locked", "t", func(ctx context.Context, tx store.Tx, id string) error {
				_, err := tx.GetSession(ctx, "t", id)
				return err
			}},
			{"locked, another tenant's", "u", func(ctx context.Context, tx store.Tx, id string) error {
				_, err := tx.GetSession(ctx, "t", id)
				return err
			}},
			{"inserted", "t", func(ctx context.Context, tx store.Tx, id string) error {
				sess := session("t", id, epoch)
				sess.Tools = held
				return tx.InsertSession(ctx, sess)
			}},
			{"inserted, another tenant's", "u", func(ctx context.Context, tx store.Tx, id string) error {
				sess := session("t", id, epoch)
				sess.Tools = held
				return tx.InsertSession(ctx, sess)
			}},
		} {
			// The held session is t/mine (made here unless the case
			// inserts it); the updated one is tc.tenant/other, or
			// u/mine: the held id under another tenant.
			mine := map[bool]string{false: "mine", true: "mine-p"}[pipelined] + string(rune('0'+i))
			other := mine
			if tc.tenant == "t" {
				other = "other-" + mine
			}
			if !strings.HasPrefix(tc.name, "inserted") {
				sess := session("t", mine, epoch)
				sess.Tools = held
				create(t, s, sess)
			}
			sess := session(tc.tenant, other, epoch)
			sess.Tools = theirs
			create(t, s, sess)
			err := s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
				if err := tc.hold(ctx, tx, mine); err != nil {
					return err
				}
				row := *sess
				row.Version++
				row.Tools = held
				return tx.UpdateSession(ctx, &row)
			})
			if err != nil {
				t.Fatalf("pipelined %v, %s: %v", pipelined, tc.name, err)
			}
			row, err := s.GetSession(t.Context(), tc.tenant, other)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(row.Tools, held) || row.Version != 2 {
				t.Errorf("pipelined %v, %s: %s/%s holds tools %+v at version %d, want %+v at 2", pipelined, tc.name, tc.tenant, other, row.Tools, row.Version, held)
			}
		}
	}
}
