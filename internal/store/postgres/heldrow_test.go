package postgres_test

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/postgres"
)

// heldCtx marks a transaction as the recording marks its own: the lock
// and the open calls may be the held row's.
func heldCtx(ctx context.Context) context.Context {
	return store.WithReadAhead(store.Pipelined(ctx), store.ReadAhead{OpenToolCalls: true, PreparedView: true, Held: true})
}

// lockedHints is the session's cache-hints row as read.
func lockedHints(t *testing.T, s *postgres.Store) store.PreparedView {
	t.Helper()
	var v store.PreparedView
	err := s.InTx(t.Context(), func(ctx context.Context, tx store.Tx) error {
		var err error
		v, err = tx.GetPreparedView(ctx, "t", "s")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// lockedRow is the session's row and open calls as a transaction reads
// them under the lock (nothing held).
func lockedRow(t *testing.T, s *postgres.Store, tenant, id string) (store.Session, []store.ToolCall) {
	t.Helper()
	var row store.Session
	var calls []store.ToolCall
	err := s.InTx(t.Context(), func(ctx context.Context, tx store.Tx) error {
		var err error
		if row, err = tx.GetSession(ctx, tenant, id); err != nil {
			return err
		}
		calls, err = tx.OpenToolCalls(ctx, tenant, id)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return row, calls
}

// heldSession makes a session (tenant t, id s) whose row and open calls
// s holds: written last by a transaction that read its open calls with
// the lock, made a call, answered another, and updated the row.
func heldSession(t *testing.T, s *postgres.Store) {
	t.Helper()
	created := time.Now().UTC().Add(-time.Hour).Truncate(time.Microsecond)
	sess := &store.Session{Tenant: "t", ID: "s", Model: "gpt-4o", Version: 1, CreatedAt: created, UpdatedAt: created,
		Tools: []chat.Tool{{Name: "read", Description: "reads", Parameters: `{"type":"object"}`}}, Labels: map[string]string{"b": "2", "a": "1"}}
	if err := s.InTx(t.Context(), func(ctx context.Context, tx store.Tx) error { return tx.InsertSession(ctx, sess) }); err != nil {
		t.Fatal(err)
	}
	ctx := store.WithReadAhead(store.Pipelined(t.Context()), store.ReadAhead{OpenToolCalls: true})
	err := s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		row, err := tx.GetSession(ctx, "t", "s")
		if err != nil {
			return err
		}
		if _, err := tx.OpenToolCalls(ctx, "t", "s"); err != nil {
			return err
		}
		if err := tx.PutToolCalls(ctx, "t", "s", []store.ToolCall{{CallID: "c1", Position: 1}, {CallID: "c2", Position: 2}}); err != nil {
			return err
		}
		if err := tx.PutToolCalls(ctx, "t", "s", []store.ToolCall{{CallID: "c1", Position: 1, ResultPosition: 3}}); err != nil {
			return err
		}
		row.Version++
		row.LogCount = 3
		row.UpdatedAt = time.Now() // nanoseconds: stored as microseconds
		row.Policy = compaction.Overrides{}
		if err := tx.UpdateSession(ctx, &row); err != nil {
			return err
		}
		return tx.PutPreparedView(ctx, "t", "s", store.PreparedView{Fixed: "f", IDs: []string{"msg_1", "msg_2", "msg_3"}, ViewToken: "v1"})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestHeldRowIsTheRow: a transaction marked Held starts from the row and
// open calls its Store's last transaction of the session committed — what
// a read under the lock returns — and locks, writes and commits in one
// round trip (two when the lock is read: fails without the held row).
func TestHeldRowIsTheRow(t *testing.T) {
	url, count := pgtest.RoundTrips(t, pgtest.URL(t))
	s, err := postgres.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	heldSession(t, s)
	var row store.Session
	var calls []store.ToolCall
	var hints store.PreparedView
	runs := 0
	held := func() {
		t.Helper()
		err := s.InTx(heldCtx(t.Context()), func(ctx context.Context, tx store.Tx) error {
			runs++
			var err error
			if row, err = tx.GetSession(ctx, "t", "s"); err != nil {
				return err
			}
			if calls, err = tx.OpenToolCalls(ctx, "t", "s"); err != nil {
				return err
			}
			if hints, err = tx.GetPreparedView(ctx, "t", "s"); err != nil {
				return err
			}
			next := row
			next.Version++
			return tx.UpdateSession(ctx, &next)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	held() // its statements prepared on the connection: a round trip of their own the first time
	n0 := count()
	held()
	if trips := count() - n0; trips != 1 || runs != 2 {
		t.Errorf("the held transaction: %d round trips, %d runs of two; want 1 and 2", trips, runs)
	}
	locked, lockedCalls := lockedRow(t, s, "t", "s")
	locked.Version-- // the one the held transaction started from
	if !reflect.DeepEqual(row, locked) {
		t.Errorf("held row\n%+v\nwant the row as read\n%+v", row, locked)
	}
	if want := []store.ToolCall{{CallID: "c2", Position: 2}}; !reflect.DeepEqual(calls, want) || !reflect.DeepEqual(lockedCalls, want) {
		t.Errorf("open calls held %v, read %v; want %v", calls, lockedCalls, want)
	}
	if read := lockedHints(t, s); !reflect.DeepEqual(hints, read) || read.ViewToken != "v1" {
		t.Errorf("hints row held %+v, read %+v", hints, read)
	}
}

// TestHeldRowStale: a held row another writer moved on (another replica's
// update, a delete and a new session of the same id) fails its guard
// before any write, and the transaction runs again on the row as read:
// the write lands on the current version, never on the held one.
func TestHeldRowStale(t *testing.T) {
	_, s, other := twoReplicas(t)
	var err error
	heldSession(t, s)
	bump := func(st *postgres.Store, logCount int64) {
		t.Helper()
		// Its open calls and hints row read with the lock: held once
		// committed.
		ctx := store.WithReadAhead(t.Context(), store.ReadAhead{OpenToolCalls: true, PreparedView: true})
		err := st.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
			row, err := tx.GetSession(ctx, "t", "s")
			if err != nil {
				return err
			}
			row.Version++
			row.LogCount = logCount
			return tx.UpdateSession(ctx, &row)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	bump(other, 7)
	var seen []int64
	err = s.InTx(heldCtx(t.Context()), func(ctx context.Context, tx store.Tx) error {
		row, err := tx.GetSession(ctx, "t", "s")
		if err != nil {
			return err
		}
		seen = append(seen, row.LogCount)
		row.Version++
		row.LogCount++
		return tx.UpdateSession(ctx, &row)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(seen, []int64{3, 7}) {
		t.Errorf("log counts seen by the runs: %v, want the held row's 3 then the stored 7", seen)
	}
	if row, _ := lockedRow(t, s, "t", "s"); row.Version != 4 || row.LogCount != 8 {
		t.Errorf("stored: version %d, log count %d; want 4 and 8 (the update on the current row)", row.Version, row.LogCount)
	}

	// Deleted and made again by another replica, at the held version.
	bump(s, 9) // held again: version 5
	held, _ := lockedRow(t, s, "t", "s")
	again := held
	again.CreatedAt = held.CreatedAt.Add(time.Second)
	err = other.InTx(t.Context(), func(ctx context.Context, tx store.Tx) error {
		if err := tx.DeleteSession(ctx, "t", "s"); err != nil {
			return err
		}
		return tx.InsertSession(ctx, &again)
	})
	if err != nil {
		t.Fatal(err)
	}
	var created []time.Time
	err = s.InTx(heldCtx(t.Context()), func(ctx context.Context, tx store.Tx) error {
		row, err := tx.GetSession(ctx, "t", "s")
		created = append(created, row.CreatedAt)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(created) != 2 || !created[1].Equal(again.CreatedAt) {
		t.Errorf("a session made again at the held version: runs saw %v, want the held row's then the new one's %v", created, again.CreatedAt)
	}

	// A refusal computed from a stale held row is not the call's: the
	// guard is answered before it is (and the run on the stored row
	// does not refuse).
	bump(s, 20)
	bump(other, 21)
	runs := 0
	err = s.InTx(heldCtx(t.Context()), func(ctx context.Context, tx store.Tx) error {
		runs++
		row, err := tx.GetSession(ctx, "t", "s")
		if err == nil && row.LogCount != 21 {
			err = errors.New("refused on a log count of " + strconv.FormatInt(row.LogCount, 10))
		}
		return err
	})
	if err != nil || runs != 2 {
		t.Errorf("a refusal on a stale held row: %v after %d runs, want none after 2", err, runs)
	}

	// The hints row written by another replica without a new version of
	// the session.
	bump(s, 22)
	putHints(t, other, "v9", "msg_9")
	tokens, err := hintsSeen(t, s)
	if err != nil || !reflect.DeepEqual(tokens, []string{"", "v9"}) {
		t.Errorf("hints rows seen: %v (%v), want the held none (the session made again has none) then the stored v9", tokens, err)
	}
	// And changed since the held one.
	bump(s, 23)
	putHints(t, other, "v10", "msg_9", "msg_10")
	tokens, err = hintsSeen(t, s)
	if err != nil || !reflect.DeepEqual(tokens, []string{"v9", "v10"}) {
		t.Errorf("hints rows seen: %v (%v), want the held v9 then the stored v10", tokens, err)
	}

	// Deleted.
	bump(s, 10)
	if err := other.InTx(t.Context(), func(ctx context.Context, tx store.Tx) error { return tx.DeleteSession(ctx, "t", "s") }); err != nil {
		t.Fatal(err)
	}
	err = s.InTx(heldCtx(t.Context()), func(ctx context.Context, tx store.Tx) error {
		_, err := tx.GetSession(ctx, "t", "s")
		return err
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a deleted session's held row: %v, want ErrNotFound", err)
	}
}

// TestHeldRowToolsAfterInsert: a transaction that locks a session, makes
// another (its tools the transaction's last written) and then updates the
// first holds the first's row with its own tools, not the other's: the
// held tools are the column a read returns (fails with the tools of the
// session inserted last held).
func TestHeldRowToolsAfterInsert(t *testing.T) {
	s, err := postgres.Open(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	heldSession(t, s)
	ctx := store.WithReadAhead(store.Pipelined(t.Context()), store.ReadAhead{OpenToolCalls: true, PreparedView: true})
	err = s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		row, err := tx.GetSession(ctx, "t", "s")
		if err != nil {
			return err
		}
		other := row
		other.ID, other.Version = "s2", 1
		other.Tools = []chat.Tool{{Name: "write", Description: "writes", Parameters: `{"type":"object"}`}}
		if err := tx.InsertSession(ctx, &other); err != nil {
			return err
		}
		row.Version++
		return tx.UpdateSession(ctx, &row)
	})
	if err != nil {
		t.Fatal(err)
	}
	var tools []chat.Tool
	err = s.InTx(heldCtx(t.Context()), func(ctx context.Context, tx store.Tx) error {
		row, err := tx.GetSession(ctx, "t", "s")
		tools = row.Tools
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 1 || tools[0].Name != "read" {
		t.Errorf("the held row's tools: %+v, want the session's own (read)", tools)
	}
	if row, _ := lockedRow(t, s, "t", "s"); len(row.Tools) != 1 || row.Tools[0].Name != "read" {
		t.Errorf("the stored row's tools: %+v, want read", row.Tools)
	}
}

// TestHeldRowGuardWaits: a held transaction whose guard waits for another
// replica's lock of the row sees that replica's commit — an update (a new
// version) or a cache-hints row written without one — and runs again on
// the stored row: the guard's check is made on the row as it is once the
// lock is granted, not as it was when the statement started.
func TestHeldRowGuardWaits(t *testing.T) {
	url, s, other := twoReplicas(t)
	var err error
	watcher, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { watcher.Close(context.Background()) })
	heldSession(t, s)
	// The hints row read with the lock too: held with the row from now on.
	bumpWithHints(t, s)
	// held runs a held transaction while other holds the row's lock, and
	// other's write (write) commits once the held guard waits for it.
	held := func(write func(ctx context.Context, tx store.Tx, row store.Session) error) (logCounts []int64, tokens []string) {
		t.Helper()
		locked, release := make(chan struct{}), make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- other.InTx(t.Context(), func(ctx context.Context, tx store.Tx) error {
				row, err := tx.GetSession(ctx, "t", "s")
				if err != nil {
					return err
				}
				close(locked)
				<-release
				return write(ctx, tx, row)
			})
		}()
		<-locked
		heldDone := make(chan error, 1)
		go func() {
			heldDone <- s.InTx(heldCtx(t.Context()), func(ctx context.Context, tx store.Tx) error {
				row, err := tx.GetSession(ctx, "t", "s")
				if err != nil {
					return err
				}
				v, err := tx.GetPreparedView(ctx, "t", "s")
				if err != nil && !errors.Is(err, store.ErrNotFound) {
					return err
				}
				logCounts, tokens = append(logCounts, row.LogCount), append(tokens, v.ViewToken)
				row.Version++
				row.LogCount++
				return tx.UpdateSession(ctx, &row)
			})
		}()
		for deadline := time.Now().Add(10 * time.Second); ; {
			var waiting int
			if err := watcher.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
				t.Fatal(err)
			}
			if waiting > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the held transaction never waited for the lock")
			}
			time.Sleep(5 * time.Millisecond)
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err := <-heldDone; err != nil {
			t.Fatal(err)
		}
		return logCounts, tokens
	}

	counts, _ := held(func(ctx context.Context, tx store.Tx, row store.Session) error {
		row.Version++
		row.LogCount = 7
		return tx.UpdateSession(ctx, &row)
	})
	if !reflect.DeepEqual(counts, []int64{3, 7}) {
		t.Errorf("log counts seen by the runs: %v, want the held 3 then the stored 7", counts)
	}
	if row, _ := lockedRow(t, s, "t", "s"); row.LogCount != 8 {
		t.Errorf("stored log count %d, want 8 (the update of the current row)", row.LogCount)
	}

	// Held again (the run above read the hints row with the lock); the
	// other writes the hints row alone, without a new version.
	_, tokens := held(func(ctx context.Context, tx store.Tx, row store.Session) error {
		return tx.PutPreparedView(ctx, "t", "s", store.PreparedView{Fixed: "f", IDs: []string{"msg_4"}, ViewToken: "v4"})
	})
	if !reflect.DeepEqual(tokens, []string{"v1", "v4"}) {
		t.Errorf("hints rows seen by the runs: %v, want the held v1 then the stored v4", tokens)
	}
}

// TestHeldRowLostCommit: a commit of this replica's that the server lost
// (a resendable transaction, synchronous_commit off, and a crash or a
// failover), then another replica's write of the session from the row
// before it, leave the stored row at the held version with other
// contents: the guard fails on it and the transaction runs again on the
// stored row (fails with the guard checking the version and incarnation
// alone: the held row's lost log count is answered).
func TestHeldRowLostCommit(t *testing.T) {
	url, s, other := twoReplicas(t)
	db, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	heldSession(t, s)
	write := func(st *postgres.Store, ctx context.Context, logCount int64) []int64 {
		t.Helper()
		var seen []int64
		err := st.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
			row, err := tx.GetSession(ctx, "t", "s")
			if err != nil {
				return err
			}
			if _, err := tx.GetPreparedView(ctx, "t", "s"); err != nil {
				return err
			}
			seen = append(seen, row.LogCount)
			row.Version++
			row.LogCount = logCount
			row.UpdatedAt = time.Now()
			return tx.UpdateSession(ctx, &row)
		})
		if err != nil {
			t.Fatal(err)
		}
		return seen
	}
	write(s, heldCtx(t.Context()), 3) // the hints row held too
	var version int64
	var updated time.Time
	if err := db.QueryRow(t.Context(), `SELECT version, updated_at FROM sessions WHERE tenant = 't' AND id = 's'`).Scan(&version, &updated); err != nil {
		t.Fatal(err)
	}
	write(s, heldCtx(t.Context()), 5) // held: log count 5, one version on
	// The server loses that commit: the row is as it was before it.
	if _, err := db.Exec(t.Context(), `UPDATE sessions SET version = $1, updated_at = $2, log_count = 3
		WHERE tenant = 't' AND id = 's'`, version, updated); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Millisecond) // another replica's clock moved on
	write(other, heldCtx(t.Context()), 7)
	if seen := write(s, heldCtx(t.Context()), 8); !reflect.DeepEqual(seen, []int64{5, 7}) {
		t.Errorf("log counts seen by the runs: %v, want the held (lost) 5 then the stored 7", seen)
	}
}

// TestHeldRowStaleWhateverFnAnswers: a held transaction whose guard failed
// runs again on the stored row whatever fn made of the error its read
// answered (fn here takes it for a missing call and goes on): a stale
// guess costs a retry, never the call's failure (fails answering the
// rolled-back commit's error).
func TestHeldRowStaleWhateverFnAnswers(t *testing.T) {
	_, s, other := twoReplicas(t)
	var err error
	heldSession(t, s)
	write := func(st *postgres.Store, logCount int64) {
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
			row.LogCount = logCount
			return tx.UpdateSession(ctx, &row)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	write(s, 3) // the hints row held too
	write(other, 7)
	var seen []int64
	err = s.InTx(heldCtx(t.Context()), func(ctx context.Context, tx store.Tx) error {
		row, err := tx.GetSession(ctx, "t", "s")
		if err != nil {
			return err
		}
		seen = append(seen, row.LogCount)
		if _, err := tx.ToolCalls(ctx, "t", "s", []string{"c9"}); err != nil {
			t.Logf("run %d: ToolCalls: %v (taken for none)", len(seen), err)
		}
		row.Version++
		row.LogCount++
		return tx.UpdateSession(ctx, &row)
	})
	if err != nil || !reflect.DeepEqual(seen, []int64{3, 7}) {
		t.Errorf("runs saw log counts %v and answered %v; want 3 then 7, and no error", seen, err)
	}
	if row, _ := lockedRow(t, s, "t", "s"); row.LogCount != 8 {
		t.Errorf("stored log count %d, want 8", row.LogCount)
	}
}

// twoReplicas opens two Stores of one throwaway database, as two replicas.
func twoReplicas(t *testing.T) (url string, s, other *postgres.Store) {
	t.Helper()
	url = pgtest.URL(t)
	var err error
	if s, err = postgres.Open(t.Context(), url); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if other, err = postgres.Open(t.Context(), url); err != nil { // another replica
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	return url, s, other
}

// putHints writes t's session s's hints row (its view token and ids)
// through st, another replica's store.
func putHints(t *testing.T, st *postgres.Store, token string, ids ...string) {
	t.Helper()
	err := st.InTx(t.Context(), func(ctx context.Context, tx store.Tx) error {
		if _, err := tx.GetSession(ctx, "t", "s"); err != nil {
			return err
		}
		return tx.PutPreparedView(ctx, "t", "s", store.PreparedView{Fixed: "f", IDs: ids, ViewToken: token})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// hintsSeen runs a held transaction on s and returns the view tokens of
// the hints rows it read (a run again after a stale guard reads twice).
func hintsSeen(t *testing.T, s *postgres.Store) ([]string, error) {
	var tokens []string
	err := s.InTx(heldCtx(t.Context()), func(ctx context.Context, tx store.Tx) error {
		if _, err := tx.GetSession(ctx, "t", "s"); err != nil {
			return err
		}
		v, err := tx.GetPreparedView(ctx, "t", "s")
		tokens = append(tokens, v.ViewToken)
		return err
	})
	return tokens, err
}
