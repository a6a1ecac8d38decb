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

// lockStore opens a store on a fresh database, and the time its tests
// write their rows at.
func lockStore(t *testing.T) (*postgres.Store, time.Time) {
	s, err := postgres.Open(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
}

// TestJobLockIsTheTenants: the advisory lock a lease takes on a tenant's
// running jobs is no other lock's key. A tenant named "jobs-running"
// compacting its session "victim" (LockCompaction, held to its commit)
// must not keep tenant victim's jobs from being leased; before, both locks
// hashed the text "jobs-running/victim", and victim's job was skipped.
func TestJobLockIsTheTenants(t *testing.T) {
	s, at := lockStore(t)
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
	release := storetest.HoldTx(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.LockCompaction(ctx, "jobs-running", "victim")
	})
	var j store.Job
	err := s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		var err error
		j, err = tx.NextJob(ctx, at.Add(time.Hour), 2)
		return err
	})
	release()
	if err != nil || j.ID != "j1" {
		t.Fatalf("NextJob while another tenant compacts a session named after victim = %q, %v; want j1", j.ID, err)
	}
}

// TestPassedOverJobIsLetGo: A leases j1 of tenant t (its tenant's lock
// held to A's commit); B's pick locks j2, finds t's lock taken and passes
// j2 over; a leaser C, after A committed, leases j2 while B's transaction
// is still open. Before, B held j2's row to the end of its transaction,
// and C found nothing while j2 was due (what made storetest's
// JobLeasesAreExclusive find "23 of 24 jobs leased" under load).
func TestPassedOverJobIsLetGo(t *testing.T) {
	s, at := lockStore(t)
	ctx := t.Context()
	for i, id := range []string{"j1", "j2"} {
		sid := "s" + id
		if err := s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
			if err := tx.InsertSession(ctx, &store.Session{Tenant: "t", ID: sid, Model: "gpt-4o", Version: 1, CreatedAt: at, UpdatedAt: at}); err != nil {
				return err
			}
			return tx.PutJob(ctx, &store.Job{Tenant: "t", SessionID: sid, ID: id, State: store.JobQueued, Epoch: 1,
				CreatedAt: at, UpdatedAt: at.Add(time.Duration(i)), LeaseUntil: time.Unix(0, 0).UTC(), NotBefore: time.Unix(0, 0).UTC()})
		}); err != nil {
			t.Fatal(err)
		}
	}
	now := at.Add(time.Hour)
	next := func(tx store.Tx) (string, error) {
		j, err := tx.NextJob(ctx, now, 10)
		return j.ID, err
	}
	// held runs NextJob in a transaction of its own, leasing what it finds,
	// and holds the transaction open until release.
	held := func(name string, picked chan<- string, release <-chan struct{}) <-chan error {
		done := make(chan error, 1)
		go func() {
			done <- s.InTx(context.Background(), func(ctx context.Context, tx store.Tx) error {
				j, err := tx.NextJob(ctx, now, 10)
				picked <- j.ID
				<-release
				if err != nil {
					return nil // nothing leased
				}
				j.State, j.Owner, j.LeaseUntil = store.JobRunning, name, now.Add(time.Hour)
				return tx.PutJob(ctx, &j)
			})
		}()
		return done
	}
	aPicked, bPicked := make(chan string, 1), make(chan string, 1)
	aRelease, bRelease := make(chan struct{}), make(chan struct{})
	// A failure lets the held transactions go before the store closes
	// (its pool waits for them): else the test hangs, its failure unsaid.
	t.Cleanup(func() {
		for _, c := range []chan struct{}{aRelease, bRelease} {
			select {
			case <-c:
			default:
				close(c)
			}
		}
	})
	aDone := held("A", aPicked, aRelease)
	if id := <-aPicked; id != "j1" {
		t.Fatalf("A picked %q; want j1", id)
	}
	bDone := held("B", bPicked, bRelease)
	if id := <-bPicked; id != "" {
		t.Fatalf("B picked %q while A holds tenant t's lock; want nothing", id)
	}
	close(aRelease)
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	var got string
	err := s.InTx(ctx, func(ctx context.Context, tx store.Tx) (err error) { got, err = next(tx); return err })
	close(bRelease)
	if err := <-bDone; err != nil {
		t.Fatal(err)
	}
	if err != nil || got != "j2" {
		t.Fatalf("C's NextJob while B's transaction, which passed j2 over, is open = %q, %v; want j2", got, err)
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

// TestNextJobRoundTrips counts, through a proxy in front of the database
// (pgtest.RoundTrips: each Sync), the round trips of a transaction that
// leases a job: NextJob's savepoint rides with the pick, 8 in all; before,
// 10 (the savepoint's Exec a round trip of its own). A pick passed over
// costs its rollback to the savepoint no round trip either.
func TestNextJobRoundTrips(t *testing.T) {
	url, trips := pgtest.RoundTrips(t, pgtest.URL(t))
	s, err := postgres.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ctx := t.Context()
	if err := s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		if err := tx.InsertSession(ctx, &store.Session{Tenant: "t", ID: "s", Model: "gpt-4o", Version: 1, CreatedAt: at, UpdatedAt: at}); err != nil {
			return err
		}
		return tx.PutJob(ctx, &store.Job{Tenant: "t", SessionID: "s", ID: "j", State: store.JobQueued, Epoch: 1,
			CreatedAt: at, UpdatedAt: at, LeaseUntil: time.Unix(0, 0).UTC(), NotBefore: time.Unix(0, 0).UTC()})
	}); err != nil {
		t.Fatal(err)
	}
	now := at.Add(time.Hour)
	before := trips()
	if err := s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		j, err := tx.NextJob(ctx, now, 10)
		if err != nil {
			return err
		}
		j.State, j.Owner, j.LeaseUntil = store.JobRunning, "a", now.Add(time.Hour)
		return tx.PutJob(ctx, &j)
	}); err != nil {
		t.Fatal(err)
	}
	if n := trips() - before; n > 8 {
		t.Errorf("%d round trips to lease a job, want at most 8", n)
	} else {
		t.Logf("%d round trips to lease a job", n)
	}
}
