package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/contextd/contextd/internal/store"
)

// checkHistoryRow: a store that reads a history lookup and a session's row
// together (store.HistoryRowFinder) answers what FindHistory and
// GetSession answer apart — the tenant's own row, never another tenant's
// of the same id — and ErrNotFound for a session that is not there or was
// deleted (gone names a deleted one).
func checkHistoryRow(t *testing.T, s store.Store, gone string) {
	t.Helper()
	f, ok := s.(store.HistoryRowFinder)
	if !ok {
		return
	}
	ctx := t.Context()
	chains := []string{chainOf(3, "shared"), chainOf(2, "shared"), chainOf(9, "shared")}
	for _, tc := range []struct{ tenant, id string }{{"t", "a"}, {"t", "b"}, {"other", "a"}} {
		hits, row, err := f.FindHistoryAndSession(ctx, tc.tenant, chains, 10, tc.id)
		if err != nil {
			t.Fatalf("%s/%s: %v", tc.tenant, tc.id, err)
		}
		wantHits, err := s.FindHistory(ctx, tc.tenant, chains, 10)
		if err != nil {
			t.Fatal(err)
		}
		wantRow, err := s.GetSession(ctx, tc.tenant, tc.id)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(hits) != fmt.Sprint(wantHits) {
			t.Errorf("%s/%s: hits %+v, FindHistory's %+v", tc.tenant, tc.id, hits, wantHits)
		}
		if !reflect.DeepEqual(row, wantRow) || row.Tenant != tc.tenant {
			t.Errorf("%s/%s: row %+v, GetSession's %+v", tc.tenant, tc.id, row, wantRow)
		}
	}
	for _, id := range []string{"missing", gone} {
		if hits, _, err := f.FindHistoryAndSession(ctx, "t", chains, 10, id); !errors.Is(err, store.ErrNotFound) || hits != nil {
			t.Errorf("session %q: %+v, %v, want ErrNotFound", id, hits, err)
		}
	}
}
