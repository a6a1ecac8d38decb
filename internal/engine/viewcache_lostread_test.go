package engine_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

// TestViewCacheLostCommitRead: what a read showed is not sure either
// under synchronous_commit off — a commit is visible before its WAL is
// flushed, so replica A may read replica C's append that the server then
// loses; replica B's appends from the row before it then leave the stored
// session at that version (or past it) with other messages. A answers the
// stored view, not the one it read. Fails with the part of an entry a
// read showed extended without checking that its last message is still
// stored (or with only that message read again): A answers C's lost
// message, at the version it read and past it.
func TestViewCacheLostCommitRead(t *testing.T) {
	r := newLostCommitReplicas(t, 3)
	a, b, c, db, v, appendOn := r.engines[0], r.engines[1], r.engines[2], r.db, r.session, r.appendOn
	check := func(what string) { t.Helper(); r.check(a, what) }
	// C's two appends are lost: the entry's last message and the one
	// before it are not the stored ones.
	lostTwo := func(text string) func() {
		return func() { appendOn(c, text); appendOn(c, text+", and more") }
	}
	appendOn(c, "Fix the bug.")
	check("before")
	loseCommit(t, db, v.ID, lostTwo("lost on C"), func() { check("C's commits read") })
	appendOn(b, "B's instead")
	appendOn(b, "B's instead, and more") // B's write of the version A read
	check("at the version A read")
	loseCommit(t, db, v.ID, lostTwo("lost on C again"), func() { check("C's commits read again") })
	appendOn(b, "B's instead again")
	appendOn(b, "B's instead again, and more")
	appendOn(b, "and one more") // past the version A read
	check("past the version A read")
}

// TestClientEditsLostCommitRead: RecordClientEdits takes the cached view
// at the version the client names, which a read showed — a commit the
// server then lost, whose version another replica wrote again. The client
// sends the stored messages unchanged: nothing is an edit. Fails with the
// edits planned on the cached view committed on the version alone: A
// records the stored message as an edit of its lost one.
func TestClientEditsLostCommitRead(t *testing.T) {
	ctx := t.Context()
	r := newLostCommitReplicas(t, 3)
	a, b, c, st, db, v, appendOn := r.engines[0], r.engines[1], r.engines[2], r.store, r.db, r.session, r.appendOn
	appendOn(c, "Fix the bug in the parser, please; it fails on empty input.")
	loseCommit(t, db, v.ID, func() { appendOn(c, "lost on C: a message the client never had, long enough to be an edit") }, func() {
		if _, err := a.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{}); err != nil { // A reads it
			t.Fatal(err)
		}
	})
	appendOn(b, "B's instead: the message the client has, and sends back unchanged")
	stored, _, err := st.ActiveMessages(ctx, tenant, v.ID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	row, err := st.GetSession(ctx, tenant, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]chat.Message{}
	for _, m := range stored {
		byID[m.ID] = m
	}
	// The client's version of a message it changed: none of the stored.
	client := func(m *chat.Message) (chat.Message, bool) {
		c, ok := byID[m.ID]
		return c, ok && !reflect.DeepEqual(c.Parts, m.Parts)
	}
	for attempt := 1; ; attempt++ {
		res, err := a.RecordClientEdits(ctx, tenant, v.ID, engine.ClientEditInput{Client: client, Expected: row.Version, Created: row.CreatedAt})
		if errors.Is(err, store.ErrVersionConflict) && attempt == 1 {
			continue // the caller matches again
		}
		if err != nil || res.Edited != 0 {
			t.Fatalf("the stored messages sent unchanged: %d edited, %v; want nothing edited", res.Edited, err)
		}
		break
	}
	after, _, err := st.ActiveMessages(ctx, tenant, v.ID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	sameMessages(t, "the view after", after, stored)
}
