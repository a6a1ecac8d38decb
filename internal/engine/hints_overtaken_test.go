package engine_test

import (
	"context"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

// afterCommitHook is a real store that runs hook once, right after the
// next transaction that commits: another call's write landing between a
// call's commit and its answer.
type afterCommitHook struct {
	store.Store
	hook *func()
}

func (s afterCommitHook) InTx(ctx context.Context, fn func(ctx context.Context, tx store.Tx) error) error {
	err := s.Store.InTx(ctx, fn)
	if h := *s.hook; err == nil && h != nil {
		*s.hook = nil
		h()
	}
	return err
}

// TestHintsOfAnOvertakenPrepareAreAgainstThePreviousAnswer: when another
// replica's write lands between PrepareContext's commit and its answer (the answer
// is then the newer view), the cache hints still compare the answer with
// the view the previous answer sent, not with the row this call wrote in
// its own transaction for a view that was never sent. Before the fix the
// hints said the call's own messages were already in the provider's cache
// (StableMessages 2, want 1).
func TestHintsOfAnOvertakenPrepareAreAgainstThePreviousAnswer(t *testing.T) {
	models, encodings := testModels(t)
	backendStores(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		var hook func()
		// No view cache: the answer reads the view again and finds the
		// other replica's write.
		e := engine.New(encodings, models, afterCommitHook{st, &hook}, engine.WithViewCacheBytes(1))
		replica := engine.New(encodings, models, st)
		v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "gpt-4o", System: "sys"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: []chat.Message{userMsg("first question")}}); err != nil {
			t.Fatal(err)
		}
		var other engine.AppendResult
		hook = func() {
			if other, err = replica.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: []chat.Message{replyMsg("from elsewhere")}}); err != nil {
				t.Error(err)
			}
		}
		prep, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: []chat.Message{userMsg("second question")}})
		if err != nil {
			t.Fatal(err)
		}
		if other.Version == 0 || prep.Status.Version != other.Version || len(prep.Messages) != 3 {
			t.Fatalf("the answer is at version %d with %d messages; want the other write's %d with 3", prep.Status.Version, len(prep.Messages), other.Version)
		}
		if !prep.Cache.HasPrevious || prep.Cache.StableMessages != 1 {
			t.Fatalf("hints: previous %v, %d stable messages; want the previous answer's 1", prep.Cache.HasPrevious, prep.Cache.StableMessages)
		}
	})
}
