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
		v := churnSession(t, w, userMsg("a"), userMsg("b"))
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

// TestPrepareStatusIsOfItsView: when another writer appends between
// PrepareContext's write and its read of the view, the answer's status is
// of the version whose view it returns (it said the older version, with the
// newer view).
func TestPrepareStatusIsOfItsView(t *testing.T) {
	models, encodings := testModels(t)
	backendStores(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		w := engine.New(encodings, models, st)
		v := churnSession(t, w, userMsg("a"))
		skip, arm := 1, 1 // the answer's first read of the view sees one change
		e := engine.New(encodings, models, churnStore{Store: st, skip: &skip, arm: &arm, write: func() {
			if _, err := w.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: []chat.Message{userMsg("other")}}); err != nil {
				t.Error(err)
			}
		}}, engine.WithViewCacheBytes(0))
		res, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{})
		if err != nil {
			t.Fatal(err)
		}
		now, err := e.GetSession(ctx, tenant, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Messages) != 2 || res.Status.Version != now.Version || res.Status.Usage.MessagesTokens != now.Usage.MessagesTokens {
			t.Fatalf("%d messages with the status of version %d (%d message tokens); the session is at %d with %d",
				len(res.Messages), res.Status.Version, res.Status.Usage.MessagesTokens, now.Version, now.Usage.MessagesTokens)
		}
	})
}

// churnSession creates a gpt-4 session holding msgs with writer w.
func churnSession(t *testing.T, w *engine.Engine, msgs ...chat.Message) engine.SessionView {
	t.Helper()
	v, err := w.CreateSession(t.Context(), tenant, engine.NewSession{Model: "gpt-4", System: "sys"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.AppendMessages(t.Context(), tenant, v.ID, engine.AppendInput{Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	return v
}
