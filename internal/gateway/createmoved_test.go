package gateway

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/store"
)

// createHook is a store whose next insert of a session (armed: its id)
// lets something run first: the insert's transaction is rolled back,
// before runs outside any transaction, and the transaction runs again, so
// the insert reaches the store after what before did. It counts the
// transactions that ended in a version conflict.
type createHook struct {
	store.Store
	mu        sync.Mutex
	armed     string
	before    func()
	conflicts atomic.Int32
}

var errHooked = errors.New("hooked: run again")

func (s *createHook) InTx(ctx context.Context, fn func(ctx context.Context, tx store.Tx) error) error {
	err := s.Store.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		return fn(ctx, hookedTx{tx, s})
	})
	if errors.Is(err, errHooked) {
		s.mu.Lock()
		before := s.before
		s.before = nil
		s.mu.Unlock()
		before()
		err = s.Store.InTx(ctx, fn)
	}
	if errors.Is(err, store.ErrVersionConflict) {
		s.conflicts.Add(1)
	}
	return err
}

type hookedTx struct {
	store.Tx
	s *createHook
}

func (tx hookedTx) InsertSession(ctx context.Context, sess *store.Session) error {
	tx.s.mu.Lock()
	defer tx.s.mu.Unlock()
	if tx.s.armed != "" && sess.ID == tx.s.armed {
		tx.s.armed = ""
		return errHooked
	}
	return tx.Tx.InsertSession(ctx, sess)
}

// TestCreateOfASessionThatMoved: a request that found its session's id
// free creates it; when a twin of the request (the same signal and
// history) made it and appended to it in between, CreateSession answers
// the create, as a retried one, with the session as it is, which moved:
// the request joins it (make's tryJoin), nothing appended again. The hook
// puts the twin's whole request between the request's lookups and its
// insert. Before (create taking any answer but AlreadyExists as made),
// the request took the session as its own at version 1 and its append
// conflicted (TestRetryStormPastTheForkBudget, on PostgreSQL under load,
// spent its retry budget so: a 409 after 10 s); here its append met one
// version conflict before the conflict loop matched it again.
func TestCreateOfASessionThatMoved(t *testing.T) {
	var hook *createHook
	g := newInProcess(t, func(st store.Store) store.Store {
		hook = &createHook{Store: st}
		return hook
	})
	ctx := t.Context()
	c, sig := chatRequest(t, g, "s1", "user", "hello")
	twin, twinSig := chatRequest(t, g, "s1", "user", "hello")
	var twinRes resolved
	var twinErr error
	hook.armed = "s1"
	hook.before = func() {
		twinRes, _, _, twinErr = g.prepare(ctx, "t", openAIChat{}, twin, twinSig, g.waitsUntil(time.Now()))
	}
	res, prep, _, err := g.prepare(ctx, "t", openAIChat{}, c, sig, g.waitsUntil(time.Now()))
	if twinErr != nil || twinRes.id != "s1" || !twinRes.made {
		t.Fatalf("the twin: %+v, %v; want s1, made", twinRes, twinErr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if hook.armed != "" {
		t.Fatal("the request's create never reached the store")
	}
	if res.id != "s1" || res.made || len(res.fresh) != 0 {
		t.Errorf("the request: session %s, made %v, %d messages to append; want s1 joined, nothing new", res.id, res.made, len(res.fresh))
	}
	if n := hook.conflicts.Load(); n != 0 {
		t.Errorf("%d version conflicts: the request took the twin's session as made at version 1", n)
	}
	if prep.Status.LogCount != 1 {
		t.Errorf("the session's log holds %d messages, want 1 (hello, once)", prep.Status.LogCount)
	}
}
