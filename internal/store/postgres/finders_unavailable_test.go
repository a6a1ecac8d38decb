package postgres_test

import (
	"errors"
	"testing"

	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/postgres"
)

// TestFindersUnavailable: the gateway's lookups (FindCalls, FindHistory,
// FindSummaries), the summary's record and GetCompaction, on a database
// that went away (its connections cut, new ones closed), fail with
// store.ErrUnavailable, which the gateway answers with 503 and
// Retry-After; they returned pgx's error unmarked, a 500.
func TestFindersUnavailable(t *testing.T) {
	link := pgtest.Faulty(t, pgtest.URL(t))
	s, err := postgres.Open(t.Context(), link.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, tenant := t.Context(), store.DefaultTenant
	calls := map[string]func() error{
		"FindCalls": func() error { _, err := s.FindCalls(ctx, tenant, []string{"call_1"}, 2); return err },
		"FindHistory": func() error {
			_, err := s.FindHistory(ctx, tenant, []string{"chain"}, 2)
			return err
		},
		"FindSummaries": func() error {
			_, err := s.FindSummaries(ctx, tenant, []string{"digest"}, 2)
			return err
		},
		"RecordSummary": func() error { return s.RecordSummary(ctx, tenant, "nobody", "digest") },
		"GetCompaction": func() error { _, err := s.GetCompaction(ctx, tenant, "nobody", "c1"); return err },
	}
	// Before: each answered (no session "nobody": the record's foreign
	// key fails, the compaction is not found).
	for name, call := range calls {
		if err := call(); errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("%s before the database went away: %v", name, err)
		}
	}
	link.Sever()
	for name, call := range calls {
		if err := call(); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s after the database went away: %v, want an error wrapping store.ErrUnavailable", name, err)
		}
	}
}
