package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/postgres"
	"github.com/contextd/contextd/internal/store/storetest"
)

// TestJobLockIsTheTenants: the advisory lock a lease takes on a tenant's
// running jobs is no other lock's key. A tenant named "jobs-running"
// compacting its session "victim" (LockCompaction, held to its commit)
// must not keep tenant victim's jobs from being leased; before, both locks
// hashed the text "jobs-running/victim", and victim's job was skipped.
func TestJobLockIsTheTenants(t *testing.T) {
	s, err := postgres.Open(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ctx := t.Context()
	for _, k := range [][2]string{{"victim", "s1"}, {"jobs-running", "victim"}} {
		if err := s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
			return tx.InsertSession(ctx, &store.Session{Tenant: k[0], ID: k[1], Model: "gpt-4o", Version: 1, CreatedAt: at, UpdatedAt: at})
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		return tx.PutJob(ctx, &store.Job{Tenant: "victim", SessionID: "s1", ID: "j1", State: store.JobQueued, Epoch: 1,
			CreatedAt: at, UpdatedAt: at, LeaseUntil: time.Unix(0, 0).UTC(), NotBefore: time.Unix(0, 0).UTC()})
	}); err != nil {
		t.Fatal(err)
	}
	locked, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- s.InTx(context.Background(), func(ctx context.Context, tx store.Tx) error {
			if err := tx.LockCompaction(ctx, "jobs-running", "victim"); err != nil {
				return err
			}
			close(locked)
			<-release
			return nil
		})
	}()
	select {
	case <-locked:
	case err := <-done:
		t.Fatal(err)
	}
	var j store.Job
	err = s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		var err error
		j, err = tx.NextJob(ctx, at.Add(time.Hour), 2)
		return err
	})
	close(release)
	if derr := <-done; derr != nil {
		t.Fatal(derr)
	}
	if err != nil || j.ID != "j1" {
		t.Fatalf("NextJob while another tenant compacts a session named after victim = %q, %v; want j1", j.ID, err)
	}
}

// TestForkLeavesParentWritable: a fork's lock on the parent's rows it
// names keeps them from being deleted, not from being updated.
func TestForkLeavesParentWritable(t *testing.T) {
	s, err := postgres.Open(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	storetest.ForkLeavesParentWritable(t, s)
}
