package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/store"
)

// testFindSummaries: FindSummaries finds the sessions of the tenant whose
// latest recorded summary has a digest, a deleted one (not yet purged)
// as not live; a newer record replaces the session's, an older one that
// lands after it does not (store.SummaryRecord: by version, then
// seq); another
// tenant's are not found; a digest many sessions recorded reads at most
// limit rows; a session made again with a deleted or purged session's id
// has no record.
func testFindSummaries(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, id := range []string{"a", "b", "c", "gone"} {
		create(t, s, session("t", id, epoch))
	}
	create(t, s, session("other", "a", epoch))
	seq := int64(0)
	recAt := func(tenant, id, digest string, version, seq int64) {
		t.Helper()
		if err := s.RecordSummary(ctx, tenant, id, store.SummaryRecord{Digest: digest, Version: version, Seq: seq}); err != nil {
			t.Fatal(err)
		}
	}
	rec := func(tenant, id, digest string) {
		t.Helper()
		seq++
		recAt(tenant, id, digest, 1, seq)
	}
	rec("t", "a", "d-old")
	rec("t", "a", "d-a")
	// Late records of older answers: of an earlier version, and of the
	// same version but an earlier request. Neither replaces d-a.
	recAt("t", "a", "d-late", 0, seq+100)
	recAt("t", "a", "d-late2", 1, 1)
	rec("t", "b", "d-same")
	rec("t", "c", "d-same")
	rec("t", "gone", "d-gone")
	rec("other", "a", "d-x")
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteSession(ctx, "t", "gone") })
	find := func(limit int, digests ...string) []string {
		t.Helper()
		hits, err := s.FindSummaries(ctx, "t", digests, limit)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, h := range hits {
			hit := h.SessionID + ":" + h.Digest
			if !h.Live {
				hit += " (deleted)"
			}
			out = append(out, hit)
		}
		slices.Sort(out)
		return out
	}
	if got, want := find(2, "d-a", "d-old", "d-late", "d-late2", "d-gone", "d-x", "d-none"), []string{"a:d-a", "gone:d-gone (deleted)"}; !slices.Equal(got, want) {
		t.Errorf("FindSummaries(d-a, d-old, d-late, d-late2, d-gone, d-x, d-none) = %q, want %q", got, want)
	}
	if got, want := find(2, "d-same"), []string{"b:d-same", "c:d-same"}; !slices.Equal(got, want) {
		t.Errorf("FindSummaries(d-same) = %q, want %q", got, want)
	}
	if got := find(1, "d-same"); len(got) != 1 {
		t.Errorf("FindSummaries(d-same, limit 1) = %q, want one row", got)
	}
	// A deleted session's record goes with it: a new session of its id
	// does not inherit it, nor does one made after a purge.
	create(t, s, session("t", "gone", epoch))
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteSession(ctx, "t", "b") })
	if got, want := find(2, "d-same"), []string{"b:d-same (deleted)", "c:d-same"}; !slices.Equal(got, want) {
		t.Errorf("FindSummaries(d-same) after b was deleted = %q, want %q", got, want)
	}
	if _, err := s.Purge(ctx, time.Now().Add(time.Hour), time.Now().Add(48*time.Hour)); err != nil {
		t.Fatal(err)
	}
	create(t, s, session("t", "b", epoch))
	if got := find(2, "d-gone", "d-same"); !slices.Equal(got, []string{"c:d-same"}) {
		t.Errorf("FindSummaries(d-gone, d-same) after gone was made again and b purged and made again = %q, want [c:d-same]", got)
	}
}
