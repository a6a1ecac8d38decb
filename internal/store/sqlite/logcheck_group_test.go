package sqlite

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// TestDeferredLogChecksInOneGroup: pipelined calls whose quota checks the
// store makes late (with the session row's UPDATE, or at the call's end)
// share one transaction; the two past the quota — one refused by its
// UPDATE's count, one by the read at its end — fail with their caller's
// error and change nothing, while the calls before and after them (and
// another tenant's, checked at its end) commit, and the call after them
// counts none of their bytes. Fails if either late check is skipped or
// made after the call's savepoint is released.
func TestDeferredLogChecksInOneGroup(t *testing.T) {
	s := openTest(t)
	s.queue.hold = time.Hour
	createSessions(t, s, 4)
	at := time.Unix(1, 0).UTC()
	if err := s.InTx(context.Background(), func(ctx context.Context, tx store.Tx) error {
		return tx.InsertSession(ctx, &store.Session{Tenant: "u", ID: "s0", Model: "gpt-4o", Version: 1, CreatedAt: at, UpdatedAt: at})
	}); err != nil {
		t.Fatal(err)
	}
	logBytes := func(tenant string) int64 {
		t.Helper()
		var n int64
		if err := s.InTx(context.Background(), func(ctx context.Context, tx store.Tx) (err error) {
			n, err = tx.LogBytes(ctx, tenant)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// One message's bytes: s3's first, committed alone.
	zero := logBytes("t")
	if err := s.InTx(context.Background(), func(ctx context.Context, tx store.Tx) error { return appendOne(ctx, tx, "s3", 1) }); err != nil {
		t.Fatal(err)
	}
	base := logBytes("t")
	b := base - zero
	if b <= 0 {
		t.Fatalf("a message counted %d bytes", b)
	}
	over := errors.New("over the quota")
	ctx := store.Pipelined(context.Background())
	// call appends message pos to session of tenant t (u for tenant u),
	// checks the quota, and writes the session row when update says so.
	call := func(tenant, session string, pos, quota int64, update bool) func(context.Context, store.Tx) error {
		return func(ctx context.Context, tx store.Tx) error {
			sess, err := tx.GetSession(ctx, tenant, session)
			if err != nil {
				return err
			}
			m := chat.Message{ID: fmt.Sprintf("%s-%d", session, pos), Position: pos, Role: chat.RoleUser, Kind: chat.KindNormal,
				CreatedAt: at, Parts: []chat.Part{{Type: chat.PartText, Text: "hi"}}}
			if err := tx.InsertMessages(ctx, tenant, session, []chat.Message{m}); err != nil {
				return err
			}
			if err := tx.CheckLogBytes(ctx, tenant, quota, over); err != nil {
				return err
			}
			if !update {
				return nil
			}
			sess.Version++
			sess.LogCount++
			return tx.UpdateSession(ctx, &sess)
		}
	}
	calls := []struct {
		name string
		fn   func(context.Context, store.Tx) error
		want error
	}{
		{"s0 within the quota, by its UPDATE", call("t", "s0", 1, base+2*b, true), nil},
		{"s1 at the quota, by its UPDATE", call("t", "s1", 1, base+2*b, true), nil},
		{"s2 past the quota, by its UPDATE", call("t", "s2", 1, base+2*b, true), over},
		{"s2 past the quota, at its end", call("t", "s2", 1, base+2*b, false), over},
		{"tenant u, at its end", call("u", "s0", 1, 1<<30, false), nil},
		{"s3 at the quota without the refused calls' bytes", call("t", "s3", 2, base+3*b, true), nil},
	}
	groups, _ := s.GroupStats()
	s.writer <- struct{}{} // the test holds the write turn: every call queues
	errs := make([]chan error, len(calls))
	for i, c := range calls {
		errs[i] = make(chan error, 1)
		go func() { errs[i] <- s.InTx(ctx, c.fn) }()
		waitQueued(t, s, i+1)
	}
	s.runGroup() // as the leader would: every call in one transaction
	<-s.writer
	for i, c := range calls {
		if err := <-errs[i]; !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if after, _ := s.GroupStats(); after != groups+1 {
		t.Errorf("%d transactions for the group, want 1", after-groups)
	}
	if got := logBytes("t"); got != base+3*b {
		t.Errorf("tenant t's log counts %d bytes, want %d (three messages of %d committed, two refused)", got, base+3*b, b)
	}
	if got := logBytes("u"); got <= 0 {
		t.Errorf("tenant u's log counts %d bytes, want its message", got)
	}
	for id, version := range map[string]int64{"s0": 2, "s1": 2, "s2": 1, "s3": 2} {
		sess, err := s.GetSession(context.Background(), "t", id)
		if err != nil || sess.Version != version {
			t.Errorf("session %s: version %d (%v), want %d", id, sess.Version, err, version)
		}
	}
	msgs, err := s.LogMessages(context.Background(), "t", "s2", 0, 10)
	if err != nil || len(msgs) != 0 {
		t.Errorf("the refused calls left %d messages in s2 (%v)", len(msgs), err)
	}
}
