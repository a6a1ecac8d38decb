package storetest

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// forkLog is a log of n messages of size bytes each, at positions 1..n;
// message i's text is tagged with texts[i] when given (a fork's edit).
func forkLog(n, size int, texts map[int]string) []chat.Message {
	msgs := make([]chat.Message, n)
	for i := range msgs {
		text := fmt.Sprintf("message %d: %s", i+1, strings.Repeat(string(rune('a'+i%26)), size))
		if s, ok := texts[i+1]; ok {
			text = s
		}
		msgs[i] = sized(fmt.Sprintf("msg_%d", i+1), int64(i+1), text, epoch)
		msgs[i].Metadata = map[string]string{"contextd.history": fmt.Sprint(i + 1)}
	}
	return msgs
}

// insertFork stores msgs as the first messages and the view of session
// id, forked from p.
func insertFork(t *testing.T, s store.Store, tenant, id string, msgs []chat.Message, p store.SharedPrefix) {
	t.Helper()
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.InsertForkMessages(ctx, tenant, id, msgs, p); err != nil {
			return err
		}
		return tx.AppendView(ctx, tenant, id, store.Entries(idsOf(msgs), 0))
	})
}

func idsOf(msgs []chat.Message) []string {
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	return ids
}

// sameMessages fails unless every read of session id (its view in and
// out of a transaction, its log, MessagesByID) returns want.
func sameMessages(t *testing.T, s store.Store, tenant, id string, want []chat.Message) {
	t.Helper()
	ctx := t.Context()
	strip := func(msgs []chat.Message) []chat.Message {
		out := make([]chat.Message, len(msgs))
		for i, m := range msgs {
			out[i] = chat.Message{ID: m.ID, Position: m.Position, Role: m.Role, Parts: m.Parts, Metadata: m.Metadata, Tokens: m.Tokens}
		}
		return out
	}
	check := func(what string, got []chat.Message, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s of %s: %v", what, id, err)
		}
		if !reflect.DeepEqual(strip(got), strip(want)) {
			t.Errorf("%s of %s: %d messages, not the %d stored (or other parts)", what, id, len(got), len(want))
		}
	}
	got, err := s.LogMessages(ctx, tenant, id, 0, 1000)
	check("LogMessages", got, err)
	got, _, err = s.ActiveMessages(ctx, tenant, id, 0, 1000)
	check("ActiveMessages", got, err)
	got, err = s.MessagesByID(ctx, tenant, id, idsOf(want))
	check("MessagesByID", got, err)
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.ViewMessages(ctx, tenant, id)
		check("ViewMessages", got, err)
		got, err = tx.MessagesByID(ctx, tenant, id, idsOf(want))
		check("Tx.MessagesByID", got, err)
		return nil
	})
	// Sizes are those of the messages' parts, shared or not: a page ends
	// at the same byte budget in a fork as in its parent.
	for _, sizes := range []func(context.Context, string, string, int64, int) ([]store.RowSize, error){s.LogSizes, s.ActiveSizes} {
		rows, err := sizes(ctx, tenant, id, 0, 1000)
		if err != nil || len(rows) != len(want) {
			t.Fatalf("sizes of %s: %d rows, %v", id, len(rows), err)
		}
		for i, r := range rows {
			if min := int64(len(want[i].Parts[0].Text)); r.Bytes < min {
				t.Errorf("size of %s/%s = %d, less than its text's %d", id, r.ID, r.Bytes, min)
			}
		}
	}
}

// testForkSharesPrefix: a fork of a 1 MB log that repeats its first
// messages stores them once: the tenant's log grows by a small fraction
// of the shared bytes (the rows' ids and metadata), plus the messages the
// fork changed or added; a fork of that fork shares them too. Every read
// of either returns what was inserted, with its full size.
func testForkSharesPrefix(t *testing.T, s store.Store) {
	const n, size = 10, 100_000
	create(t, s, session("t", "parent", epoch))
	parent := forkLog(n, size, nil)
	insertMessages(t, s, "t", "parent", parent)
	before := logBytes(t, s, "t")

	// The fork edits message 8 and goes on with message 11.
	edited := map[int]string{8: "an edit"}
	fork := append(forkLog(n, size, edited)[:8], sized("msg_9", 9, "goes on", epoch))
	create(t, s, session("t", "fork", epoch))
	insertFork(t, s, "t", "fork", fork, store.SharedPrefix{SessionID: "parent", Length: n})
	shared := storedBytes(t, s, "t", "parent") * 7 / n // messages 1..7
	added := logBytes(t, s, "t") - before
	if own := int64(len("an edit") + len("goes on")); added-own > shared/100 {
		t.Errorf("the fork added %d bytes for %d shared (%.2f %%); want under 1 %%", added, shared, 100*float64(added-own)/float64(shared))
	}
	sameMessages(t, s, "t", "fork", fork)
	sameMessages(t, s, "t", "parent", parent)

	// A fork of the fork shares the same rows (never a chain of them),
	// and what the fork changed is not the parent's.
	create(t, s, session("t", "fork2", epoch))
	before = logBytes(t, s, "t")
	insertFork(t, s, "t", "fork2", fork[:8], store.SharedPrefix{SessionID: "fork", Length: 9})
	if added := logBytes(t, s, "t") - before; added > shared/100 {
		t.Errorf("the fork's fork added %d bytes for %d shared", added, shared)
	}
	sameMessages(t, s, "t", "fork2", fork[:8])

	// Another tenant's identical log is not shared.
	create(t, s, session("t2", "fork", epoch))
	insertFork(t, s, "t2", "fork", parent, store.SharedPrefix{SessionID: "parent", Length: n})
	if got := logBytes(t, s, "t2"); got < int64(n*size) {
		t.Errorf("tenant t2 stores %d bytes for a %d-byte log: it shares another tenant's", got, n*size)
	}
	sameMessages(t, s, "t2", "fork", parent)
}

// testForkOutlivesParent: when the parent's rows go (its session deleted
// and purged, or its id made again), the fork's messages are copied into
// one of them first (the other fork names it): every read still returns
// them, and the tenant's count is exactly what the rows now hold, the
// shared messages once. A parent and fork purged together leave nothing
// counted.
func testForkOutlivesParent(t *testing.T, s store.Store) {
	const n, size = 6, 10_000
	for _, how := range []string{"purge", "create again", "purge both", "purge messages"} {
		t.Run(how, func(t *testing.T) {
			tenant := strings.ReplaceAll(how, " ", "-")
			create(t, s, session(tenant, "parent", epoch))
			parent := forkLog(n, size, nil)
			insertMessages(t, s, tenant, "parent", parent)
			fork := forkLog(n, size, map[int]string{n: "an edit"})
			for _, id := range []string{"fork", "fork2"} {
				create(t, s, session(tenant, id, epoch))
				insertFork(t, s, tenant, id, fork, store.SharedPrefix{SessionID: "parent", Length: n})
			}
			mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
				if how == "purge messages" {
					// The parent lives on without its old messages in its view:
					// retention deletes them, the parent's rows alone.
					return tx.ReplaceView(ctx, tenant, "parent", []string{parent[n-1].ID})
				}
				if err := tx.DeleteSession(ctx, tenant, "parent"); err != nil {
					return err
				}
				if how == "purge both" {
					return tx.DeleteSession(ctx, tenant, "fork")
				}
				return nil
			})
			switch how {
			case "create again":
				create(t, s, session(tenant, "parent", epoch.Add(time.Hour)))
			default:
				if p, err := s.Purge(t.Context(), time.Now().Add(time.Hour), time.Now().Add(48*time.Hour)); err != nil || p.Sessions+p.Messages == 0 {
					t.Fatalf("purge: %+v, %v", p, err)
				}
			}
			kept := 0 // the parent's messages left
			if how == "purge messages" {
				kept = 1
			}
			if got, err := s.LogMessages(t.Context(), tenant, "parent", 0, 10); err != nil || len(got) != kept {
				t.Fatalf("the parent's log still holds %d messages (%v)", len(got), err)
			}
			live := []string{"fork", "fork2"}
			if how == "purge both" {
				live = live[1:]
			}
			for _, id := range live {
				sameMessages(t, s, tenant, id, fork)
			}
			// The forks' sizes count the shared messages (1..n-1) each; the
			// rows hold them once.
			twice := int64(len(live)-1) * partsBytes(t, fork[:n-1])
			if how == "purge messages" {
				live = append(live, "parent")
			}
			if got, want := logBytes(t, s, tenant), storedBytes(t, s, tenant, live...)-twice; got != want {
				t.Errorf("LogBytes = %d after the parent went; the rows hold %d", got, want)
			}
		})
	}
}

// testForkRacesParentDelete: a fork stored while its parent's rows go
// (the deleted parent's id made again, which deletes its archive) keeps
// every message whichever transaction commits first: the fork's insert
// holds the rows it names, so a delete after it waits and then copies
// them; a delete first leaves the fork nothing to name, and it stores its
// own. Each case holds its first transaction open while the second starts.
func testForkRacesParentDelete(t *testing.T, s store.Store) {
	const n, size = 4, 5_000
	for _, forkFirst := range []bool{true, false} {
		tenant := fmt.Sprintf("race-%v", forkFirst)
		create(t, s, session(tenant, "parent", epoch))
		parent := forkLog(n, size, nil)
		insertMessages(t, s, tenant, "parent", parent)
		create(t, s, session(tenant, "fork", epoch))
		mustTx(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteSession(ctx, tenant, "parent") })
		fork := func(ctx context.Context, tx store.Tx) error {
			if err := tx.InsertForkMessages(ctx, tenant, "fork", parent, store.SharedPrefix{SessionID: "parent", Length: n}); err != nil {
				return err
			}
			return tx.AppendView(ctx, tenant, "fork", store.Entries(idsOf(parent), 0))
		}
		recreate := func(ctx context.Context, tx store.Tx) error {
			return tx.InsertSession(ctx, session(tenant, "parent", epoch.Add(time.Hour)))
		}
		first, second := fork, recreate
		if !forkFirst {
			first, second = recreate, fork
		}
		started, done := make(chan struct{}), make(chan error, 1)
		go func() {
			<-started
			done <- s.InTx(context.Background(), second)
		}()
		mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
			err := first(ctx, tx)
			close(started)
			time.Sleep(200 * time.Millisecond) // the second transaction waits, or runs
			return err
		})
		if err := <-done; err != nil {
			t.Fatalf("fork first %v: the second transaction: %v", forkFirst, err)
		}
		sameMessages(t, s, tenant, "fork", parent)
		if got, want := logBytes(t, s, tenant), storedBytes(t, s, tenant, "fork"); got != want {
			t.Errorf("fork first %v: LogBytes = %d; the rows hold %d", forkFirst, got, want)
		}
	}
}

// testForkHeir: when a row that many forks name goes, its parts are
// copied once, into one of them (the heir), and the others name the heir:
// the tenant's count grows by the shared bytes once, not once a fork (a
// tenant under a quota could otherwise fork a log many times for a few
// bytes each and, by deleting the parent, store it as many times over the
// quota, all in one purge statement). Every fork still reads every
// message, also after the heir's own session goes in its turn.
func testForkHeir(t *testing.T, s store.Store) {
	const n, size, forks = 4, 20_000, 8
	const tenant = "heir"
	create(t, s, session(tenant, "parent", epoch))
	parent := forkLog(n, size, nil)
	insertMessages(t, s, tenant, "parent", parent)
	ids := make([]string, forks)
	for i := range ids {
		ids[i] = fmt.Sprintf("fork%d", i)
		create(t, s, session(tenant, ids[i], epoch))
		insertFork(t, s, tenant, ids[i], parent, store.SharedPrefix{SessionID: "parent", Length: n})
	}
	shared := storedBytes(t, s, tenant, "parent")
	before := logBytes(t, s, tenant)
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteSession(ctx, tenant, "parent") })
	if _, err := s.Purge(t.Context(), time.Now().Add(time.Hour), time.Now().Add(48*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.LogMessages(t.Context(), tenant, "parent", 0, 10); err != nil || len(got) != 0 {
		t.Fatalf("the parent's log still holds %d messages (%v)", len(got), err)
	}
	// The parent's rows went (their bytes with them) and one copy came.
	if grown := logBytes(t, s, tenant) - before; grown > shared/10 {
		t.Errorf("the parent's %d shared bytes, gone, made the tenant's count grow by %d (%d forks): copied into every fork", shared, grown, forks)
	}
	for _, id := range ids {
		sameMessages(t, s, tenant, id, parent)
	}
	// Each fork's session goes in turn; the others keep every message,
	// and the count stays what one copy holds.
	for i, id := range ids[:forks-1] {
		mustTx(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteSession(ctx, tenant, id) })
		if _, err := s.Purge(t.Context(), time.Now().Add(time.Hour), time.Now().Add(48*time.Hour)); err != nil {
			t.Fatal(err)
		}
		for _, other := range ids[i+1:] {
			sameMessages(t, s, tenant, other, parent)
		}
	}
	if got, want := logBytes(t, s, tenant), storedBytes(t, s, tenant, ids[forks-1]); got != want {
		t.Errorf("LogBytes = %d with one fork left; its rows hold %d", got, want)
	}
}

// partsBytes is the size of msgs' stored parts.
func partsBytes(t *testing.T, msgs []chat.Message) int64 {
	t.Helper()
	var n int64
	for _, m := range msgs {
		enc, err := store.EncodeJSON(m.Parts)
		if err != nil {
			t.Fatal(err)
		}
		n += int64(len(enc))
	}
	return n
}

// testForkHeirRacesItsDelete: the heir's own rows going while the row it
// inherits goes (another fork's id made again, holding its transaction
// open, while the parent's is made again) must not leave the other forks
// naming a row that is gone: they keep every message.
func testForkHeirRacesItsDelete(t *testing.T, s store.Store) {
	const n, size = 3, 5_000
	const tenant = "heir-race"
	create(t, s, session(tenant, "parent", epoch))
	parent := forkLog(n, size, nil)
	insertMessages(t, s, tenant, "parent", parent)
	for _, id := range []string{"fork1", "fork2"} { // fork1 is the heir
		create(t, s, session(tenant, id, epoch))
		insertFork(t, s, tenant, id, parent, store.SharedPrefix{SessionID: "parent", Length: n})
	}
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.DeleteSession(ctx, tenant, "parent"); err != nil {
			return err
		}
		return tx.DeleteSession(ctx, tenant, "fork1")
	})
	recreate := func(id string) func(ctx context.Context, tx store.Tx) error {
		return func(ctx context.Context, tx store.Tx) error {
			return tx.InsertSession(ctx, session(tenant, id, epoch.Add(time.Hour)))
		}
	}
	started, done := make(chan struct{}), make(chan error, 1)
	go func() {
		<-started
		done <- s.InTx(context.Background(), recreate("parent"))
	}()
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		err := recreate("fork1")(ctx, tx)
		close(started)
		time.Sleep(300 * time.Millisecond) // the parent's delete picks its heir meanwhile
		return err
	})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	sameMessages(t, s, tenant, "fork2", parent)
	if got, want := logBytes(t, s, tenant), storedBytes(t, s, tenant, "fork2"); got != want {
		t.Errorf("LogBytes = %d; fork2's rows hold %d", got, want)
	}
}

// ForkLeavesParentWritable (stores with concurrent writers: PostgreSQL):
// while a fork's transaction holds the parent's rows it names (against
// their delete), the parent's own writes of those rows (SetMessageTokens:
// a revert, a change of model) go on; they do not wait for the fork's
// commit.
func ForkLeavesParentWritable(t *testing.T, s store.Store) {
	const tenant = "fork-writable"
	create(t, s, session(tenant, "parent", epoch))
	parent := forkLog(3, 1_000, nil)
	insertMessages(t, s, tenant, "parent", parent)
	create(t, s, session(tenant, "fork", epoch))
	release := HoldTx(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.InsertForkMessages(ctx, tenant, "fork", parent, store.SharedPrefix{SessionID: "parent", Length: 3})
	})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	err := s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		return tx.SetMessageTokens(ctx, tenant, "parent", map[string]int64{parent[0].ID: 7}, "")
	})
	cancel()
	release()
	if err != nil {
		t.Fatalf("the parent's SetMessageTokens while a fork's transaction named its rows: %v", err)
	}
}

// ForksPurgedTogether stores a parent and n forks of its first message
// (sessions created in the order of their ids), deletes them all and
// purges them in one run: nothing of the tenant is left, nothing counted.
func ForksPurgedTogether(t testing.TB, s store.Store, n int) {
	const tenant = "purged-together"
	ctx := context.Background()
	parent := forkLog(1, 1_000, nil)
	ids := []string{"a-parent"}
	for i := range n {
		ids = append(ids, fmt.Sprintf("f%06d", i))
	}
	for i, id := range ids {
		if err := s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
			if err := tx.InsertSession(ctx, session(tenant, id, epoch)); err != nil {
				return err
			}
			if i == 0 {
				return tx.InsertMessages(ctx, tenant, id, parent)
			}
			return tx.InsertForkMessages(ctx, tenant, id, parent, store.SharedPrefix{SessionID: ids[0], Length: 1})
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		for _, id := range ids {
			if err := tx.DeleteSession(ctx, tenant, id); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Purge(ctx, time.Now().Add(time.Hour), time.Now().Add(48*time.Hour)); err != nil {
		t.Fatal(err)
	}
	var left int64
	if err := s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		var err error
		left, err = tx.LogBytes(ctx, tenant)
		return err
	}); err != nil || left != 0 {
		t.Fatalf("after the purge the tenant counts %d bytes (%v)", left, err)
	}
}

// HoldTx runs fn in a transaction of its own and holds that transaction
// open (its locks held) until the returned release, which commits it and
// fails t if it failed; fn failing fails t at once.
func HoldTx(t testing.TB, s store.Store, fn func(ctx context.Context, tx store.Tx) error) (release func()) {
	t.Helper()
	locked, held, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- s.InTx(context.Background(), func(ctx context.Context, tx store.Tx) error {
			if err := fn(ctx, tx); err != nil {
				return err
			}
			close(locked)
			<-held
			return nil
		})
	}()
	select {
	case <-locked:
	case err := <-done:
		t.Fatal(err)
	}
	return sync.OnceFunc(func() {
		close(held)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
