package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/postgres"
)

// TestFindersUnavailable: the gateway's lookups (FindCalls, FindHistory,
// FindSummaries), the summary's record and GetCompaction, on a database
// that went away (its connections cut, new ones closed), fail with
// store.ErrUnavailable, which the gateway answers with 503 and
// Retry-After; they returned pgx's error unmarked, a 500. So do the
// background jobs' reads and Ping, marked by the same change. A caller
// that gave up (its context done) is never told unavailable, the
// database there or not: its client would retry at once.
func TestFindersUnavailable(t *testing.T) {
	link := pgtest.Faulty(t, pgtest.URL(t))
	s, err := postgres.Open(t.Context(), link.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tenant := store.DefaultTenant
	calls := map[string]func(ctx context.Context) error{
		"FindCalls": func(ctx context.Context) error { _, err := s.FindCalls(ctx, tenant, []string{"call_1"}, 2); return err },
		"FindHistory": func(ctx context.Context) error {
			_, err := s.FindHistory(ctx, tenant, []string{"chain"}, 2)
			return err
		},
		"FindSummaries": func(ctx context.Context) error {
			_, err := s.FindSummaries(ctx, tenant, []string{"digest"}, 2)
			return err
		},
		"RecordSummary": func(ctx context.Context) error {
			return s.RecordSummary(ctx, tenant, "nobody", store.SummaryRecord{Digest: "digest"})
		},
		"GetCompaction": func(ctx context.Context) error { _, err := s.GetCompaction(ctx, tenant, "nobody", "c1"); return err },
		// The background jobs' and the health check's, which the same
		// change marks.
		"Ping":       func(ctx context.Context) error { return s.Ping(ctx) },
		"SweepViews": func(ctx context.Context) error { _, err := s.SweepViews(ctx, tenant, "nobody", 10); return err },
		"CloseIdleSessions": func(ctx context.Context) error {
			_, err := s.CloseIdleSessions(ctx, "gateway", time.Now(), time.Now(), 10)
			return err
		},
		"StrayViewGens": func(ctx context.Context) error {
			_, _, err := s.StrayViewGens(ctx, store.StrayCursor{}, 10)
			return err
		},
		"DropViewGen": func(ctx context.Context) error {
			_, err := s.DropViewGen(ctx, store.ViewGen{Tenant: tenant, SessionID: "nobody", Gen: 1}, 10)
			return err
		},
	}
	// Before: each answered (no session "nobody": the record's foreign
	// key fails, the compaction is not found).
	// A caller that gave up is not a database gone away, before or
	// after it went (a 503 would have its client retry at once).
	gaveUp, cancel := context.WithCancel(t.Context())
	cancel()
	for name, call := range calls {
		if err := call(t.Context()); errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("%s before the database went away: %v", name, err)
		}
		if err := call(gaveUp); err == nil || errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s of a caller that gave up: %v, want its context's error, not unavailable", name, err)
		}
	}
	link.Sever()
	for name, call := range calls {
		if err := call(t.Context()); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s after the database went away: %v, want an error wrapping store.ErrUnavailable", name, err)
		}
		if err := call(gaveUp); err == nil || errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s of a caller that gave up, the database gone: %v, want its context's error, not unavailable", name, err)
		}
	}
}
