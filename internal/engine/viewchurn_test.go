package engine_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

// churnStore is a real store where another writer appends to the session
// right after each of the reads of the active view it is armed for (after
// skipping `skip` reads): a session that keeps changing while it is read.
type churnStore struct {
	store.Store
	skip, arm *int
	write     func()
}

func (s churnStore) ActiveMessages(ctx context.Context, tenant, id string, after int64, limit int) ([]chat.Message, []int64, error) {
	msgs, ords, err := s.Store.ActiveMessages(ctx, tenant, id, after, limit)
	switch {
	case *s.skip > 0:
		*s.skip--
	case *s.arm > 0:
		*s.arm--
		s.write()
	}
	return msgs, ords, err
}

// TestPrepareViewUnderChurn: a view read while the session keeps changing
// is never paired with a version it was not read at; PrepareContext answers
// the view at the version its status names.
func TestPrepareViewUnderChurn(t *testing.T) {
	models, encodings := testModels(t)
	backendStores(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		w := engine.New(encodings, models, st)
		v, err := w.CreateSession(ctx, tenant, engine.NewSession{Model: "gpt-4", System: "sys"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: []chat.Message{userMsg("a"), userMsg("b")}}); err != nil {
			t.Fatal(err)
		}
		n := 0
		skip, arm := 1, 3 // PrepareContext's first read passes, the answer's three reads each see a change
		e := engine.New(encodings, models, churnStore{Store: st, skip: &skip, arm: &arm, write: func() {
			n++
			if _, err := w.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: []chat.Message{userMsg(fmt.Sprintf("other %d", n))}}); err != nil {
				t.Error(err)
			}
		}}, engine.WithViewCacheBytes(0))
		res, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{})
		if err != nil {
			t.Fatal(err)
		}
		if arm != 0 {
			t.Fatalf("the test armed 3 changes, %d were not made", arm)
		}
		// The status names the version the call read (2 messages); the
		// messages must be that version's view.
		if len(res.Messages) != 2 || res.Status.Version != v.Version+1 {
			t.Fatalf("answer: %d messages at version %d (session created at %d, 2 messages at %d)",
				len(res.Messages), res.Status.Version, v.Version, v.Version+1)
		}
	})
}
