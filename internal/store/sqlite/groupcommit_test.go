package sqlite

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

func openTest(t testing.TB) *Store {
	t.Helper()
	s, err := Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func createSessions(t testing.TB, s *Store, n int) {
	t.Helper()
	at := time.Unix(1, 0).UTC()
	for i := range n {
		if err := s.InTx(context.Background(), func(ctx context.Context, tx store.Tx) error {
			return tx.InsertSession(ctx, &store.Session{Tenant: "t", ID: fmt.Sprintf("s%d", i), Model: "gpt-4o", Version: 1, CreatedAt: at, UpdatedAt: at})
		}); err != nil {
			t.Fatal(err)
		}
	}
}

func appendOne(ctx context.Context, tx store.Tx, session string, pos int64) error {
	return tx.InsertMessages(ctx, "t", session, []chat.Message{{ID: fmt.Sprintf("%s-%d", session, pos), Position: pos,
		Role: chat.RoleUser, Kind: chat.KindNormal, CreatedAt: time.Unix(2, 0).UTC(), Parts: []chat.Part{{Type: chat.PartText, Text: "hi"}}}})
}

// TestCallsQueuedMeanwhileShareOneCommit: while one call holds the write
// turn, five calls of other sessions queue; they then run in one
// transaction (two commits for six calls, where one transaction per call
// made six), and the one among them that fails after writing changes
// nothing while the other four commit. Fails before group commit
// (transactions = 6).
func TestCallsQueuedMeanwhileShareOneCommit(t *testing.T) {
	s := openTest(t)
	s.queue.hold = time.Hour // the five go in one group however slow the machine
	createSessions(t, s, 6)
	tx0, calls0 := s.GroupStats()
	hold, holding := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, 6)
	wg.Add(1)
	go func() {
		defer wg.Done()
		errs[0] = s.InTx(context.Background(), func(ctx context.Context, tx store.Tx) error {
			close(holding)
			<-hold
			return appendOne(ctx, tx, "s0", 1)
		})
	}()
	<-holding
	boom := errors.New("boom")
	for i := 1; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.InTx(context.Background(), func(ctx context.Context, tx store.Tx) error {
				if err := appendOne(ctx, tx, fmt.Sprintf("s%d", i), 1); err != nil {
					return err
				}
				if i == 3 {
					return boom
				}
				return nil
			})
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		s.queue.mu.Lock()
		n := len(s.queue.pending)
		s.queue.mu.Unlock()
		if n == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls queued, want 5", n)
		}
	}
	close(hold)
	wg.Wait()
	for i, err := range errs {
		if (i == 3) != errors.Is(err, boom) || (i != 3 && err != nil) {
			t.Errorf("call %d: %v", i, err)
		}
	}
	txs, calls := s.GroupStats()
	if txs-tx0 != 2 || calls-calls0 != 5 {
		t.Errorf("%d transactions held %d committed calls, want 2 and 5", txs-tx0, calls-calls0)
	}
	for i := range 6 {
		log, err := s.LogMessages(context.Background(), "t", fmt.Sprintf("s%d", i), 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 0, false: 1}[i == 3]; len(log) != want {
			t.Errorf("s%d holds %d messages, want %d", i, len(log), want)
		}
	}
}

// TestCancelledCallLeavesTheGroup: a call whose caller gives up while it
// waits in the queue is taken out and answers the context's error; it
// writes nothing.
func TestCancelledCallLeavesTheGroup(t *testing.T) {
	s := openTest(t)
	createSessions(t, s, 2)
	hold, holding := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.InTx(context.Background(), func(ctx context.Context, tx store.Tx) error {
			close(holding)
			<-hold
			return appendOne(ctx, tx, "s0", 1)
		})
	}()
	<-holding
	ctx, cancel := context.WithCancel(context.Background())
	waiting := make(chan error, 1)
	go func() {
		waiting <- s.InTx(ctx, func(ctx context.Context, tx store.Tx) error { return appendOne(ctx, tx, "s1", 1) })
	}()
	for {
		s.queue.mu.Lock()
		n := len(s.queue.pending)
		s.queue.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-waiting; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: %v", err)
	}
	close(hold)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if log, _ := s.LogMessages(context.Background(), "t", "s1", 0, 10); len(log) != 0 {
		t.Errorf("the cancelled call wrote %d messages", len(log))
	}
}

// BenchmarkGroupCommit: 16 goroutines append one message each to their own
// session per call (synchronous=FULL: one fsync per commit). It reports
// calls/s and transactions per call (1 without group commit).
func BenchmarkGroupCommit(b *testing.B) {
	const clients = 16
	s := openTest(b)
	createSessions(b, s, clients)
	tx0, calls0 := s.GroupStats()
	var next sync.Mutex
	n := 0
	take := func() bool { next.Lock(); defer next.Unlock(); n++; return n <= b.N }
	var wg sync.WaitGroup
	start := time.Now()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pos := int64(1); take(); pos++ {
				if err := s.InTx(context.Background(), func(ctx context.Context, tx store.Tx) error {
					return appendOne(ctx, tx, fmt.Sprintf("s%d", c), pos)
				}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	txs, calls := s.GroupStats()
	b.ReportMetric(float64(calls-calls0)/elapsed.Seconds(), "calls/s")
	b.ReportMetric(float64(txs-tx0)/float64(calls-calls0), "transactions/call")
}

// TestCancelledCallPutBackIsAnswered: a call taken into a group whose
// caller gives up while an earlier function runs, and which the group then
// puts back (its hold spent), is answered even when no other call comes to
// take the write turn. Before, its caller waited for an answer only a
// later leader would give, and hung on an idle store.
func TestCancelledCallPutBackIsAnswered(t *testing.T) {
	s := openTest(t)
	s.queue.hold = time.Nanosecond // the second call is always put back
	createSessions(t, s, 2)
	s.writer <- struct{}{} // the test holds the write turn: both calls queue
	running, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- s.InTx(context.Background(), func(ctx context.Context, tx store.Tx) error {
			close(running)
			<-release
			return appendOne(ctx, tx, "s0", 1)
		})
	}()
	waitQueued(t, s, 1)
	ctx, cancel := context.WithCancel(context.Background())
	second := make(chan error, 1)
	go func() {
		second <- s.InTx(ctx, func(ctx context.Context, tx store.Tx) error { return appendOne(ctx, tx, "s1", 1) })
	}()
	waitQueued(t, s, 2)
	grouped := make(chan struct{})
	go func() { s.runGroup(); close(grouped) }() // as the leader would
	<-running
	cancel()
	time.Sleep(50 * time.Millisecond) // the second caller sees its cancellation while the group holds its call
	close(release)
	<-grouped
	<-s.writer
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-second:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled call answered %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a cancelled call put back into the queue was never answered")
	}
	if log, _ := s.LogMessages(context.Background(), "t", "s1", 0, 10); len(log) != 0 {
		t.Errorf("the cancelled call wrote %d messages", len(log))
	}
}

func waitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		s.queue.mu.Lock()
		l := len(s.queue.pending)
		s.queue.mu.Unlock()
		if l == n {
			return
		}
	}
	t.Fatalf("%d calls never queued", n)
}

// TestPanickingCallFailsAlone: a function of a group that panics after
// writing is its caller's error and changes nothing; the calls before and
// after it in the same transaction commit.
func TestPanickingCallFailsAlone(t *testing.T) {
	s := openTest(t)
	s.queue.hold = time.Hour
	createSessions(t, s, 3)
	s.writer <- struct{}{} // the test holds the write turn: all three queue
	errs := make([]chan error, 3)
	for i := range 3 {
		errs[i] = make(chan error, 1)
		go func() {
			errs[i] <- s.InTx(context.Background(), func(ctx context.Context, tx store.Tx) error {
				if err := appendOne(ctx, tx, fmt.Sprintf("s%d", i), 1); err != nil {
					return err
				}
				if i == 1 {
					panic("boom")
				}
				return nil
			})
		}()
		waitQueued(t, s, i+1)
	}
	tx0, _ := s.GroupStats()
	s.runGroup() // as the leader would
	<-s.writer
	for i := range 3 {
		if err := <-errs[i]; (i == 1) != (err != nil) {
			t.Errorf("call %d: %v", i, err)
		}
	}
	if txs, _ := s.GroupStats(); txs-tx0 != 1 {
		t.Errorf("%d transactions, want 1", txs-tx0)
	}
	for i := range 3 {
		log, err := s.LogMessages(context.Background(), "t", fmt.Sprintf("s%d", i), 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 0, false: 1}[i == 1]; len(log) != want {
			t.Errorf("s%d holds %d messages, want %d", i, len(log), want)
		}
	}
}

// TestLaterCallDoesNotSeeFailedCallsWrites: a call that reads what an
// earlier call of its group wrote reads nothing of a call that failed —
// that call's writes are rolled back before the next function runs — so
// no call commits what it derived from writes that were never stored.
func TestLaterCallDoesNotSeeFailedCallsWrites(t *testing.T) {
	s := openTest(t)
	s.queue.hold = time.Hour
	createSessions(t, s, 1)
	s.writer <- struct{}{} // the test holds the write turn: both calls queue
	boom := errors.New("boom")
	failed := make(chan error, 1)
	go func() {
		failed <- s.InTx(context.Background(), func(ctx context.Context, tx store.Tx) error {
			sess, err := tx.GetSession(ctx, "t", "s0")
			if err != nil {
				return err
			}
			sess.Version = 99
			if err := tx.UpdateSession(ctx, &sess); err != nil {
				return err
			}
			return boom
		})
	}()
	waitQueued(t, s, 1)
	var seen int64
	reader := make(chan error, 1)
	go func() {
		reader <- s.InTx(context.Background(), func(ctx context.Context, tx store.Tx) error {
			sess, err := tx.GetSession(ctx, "t", "s0")
			seen = sess.Version
			return err
		})
	}()
	waitQueued(t, s, 2)
	s.runGroup() // as the leader would: both in one transaction
	<-s.writer
	if err := <-failed; !errors.Is(err, boom) {
		t.Fatalf("failing call: %v", err)
	}
	if err := <-reader; err != nil {
		t.Fatal(err)
	}
	if seen != 1 {
		t.Errorf("the later call read version %d, written by a call that failed; want 1", seen)
	}
}
