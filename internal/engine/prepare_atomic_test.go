package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

var errInjected = errors.New("injected failure")

// failAfterCommit is a real store whose cache-hint write and ledger read
// fail: what PrepareContext does after its append committed.
type failAfterCommit struct{ store.Store }

func (s failAfterCommit) InTx(ctx context.Context, fn func(ctx context.Context, tx store.Tx) error) error {
	return s.Store.InTx(ctx, func(ctx context.Context, tx store.Tx) error { return fn(ctx, failHintsTx{tx}) })
}

func (s failAfterCommit) GetLedger(context.Context, string, string) (store.Ledger, error) {
	return store.Ledger{}, errInjected
}

type failHintsTx struct{ store.Tx }

func (failHintsTx) PutPreparedView(context.Context, string, string, store.PreparedView) error {
	return errInjected
}

// TestPrepareCommittedIsAnswered: once the append is stored, a failure of
// the cache hints or the ledger is a warning on the answer, never the
// call's error (a retry would append again without an idempotency key).
func TestPrepareCommittedIsAnswered(t *testing.T) {
	models, encodings := testModels(t)
	backendStores(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		e := engine.New(encodings, models, st)
		faulty := engine.New(encodings, models, failAfterCommit{st})
		v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "gpt-4", System: "sys"})
		if err != nil {
			t.Fatal(err)
		}
		res, err := faulty.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: []chat.Message{userMsg("hi")}})
		if err != nil {
			t.Fatalf("PrepareContext after its append committed: %v", err)
		}
		if len(res.Messages) != 1 || res.Status.Version != v.Version+1 || res.Status.Ledger != nil {
			t.Fatalf("answer: %d messages, version %d, ledger %v", len(res.Messages), res.Status.Version, res.Status.Ledger)
		}
		w := strings.Join(res.Status.Warnings, " ")
		if !strings.Contains(w, "cache hints") || !strings.Contains(w, "ledger") {
			t.Fatalf("warnings %q do not name the hints and the ledger", w)
		}
		log, err := e.GetMessages(ctx, tenant, v.ID, engine.ViewLog, engine.Page{})
		if err != nil || len(log.Messages) != 1 {
			t.Fatalf("log: %v, %v", log.Messages, err)
		}
	})
}

// countPuts is a real store that counts the writes of the prepared view.
type countPuts struct {
	store.Store
	n *int
}

func (s countPuts) InTx(ctx context.Context, fn func(ctx context.Context, tx store.Tx) error) error {
	return s.Store.InTx(ctx, func(ctx context.Context, tx store.Tx) error { return fn(ctx, countPutsTx{tx, s.n}) })
}

type countPutsTx struct {
	store.Tx
	n *int
}

func (t countPutsTx) PutPreparedView(ctx context.Context, tenant, id string, v store.PreparedView) error {
	*t.n++
	return t.Tx.PutPreparedView(ctx, tenant, id, v)
}

// TestPrepareUnchangedWritesNoHints: a PrepareContext whose answer equals
// the previous one does not rewrite the recorded answer (an fsync on
// SQLite); one whose view changed does.
func TestPrepareUnchangedWritesNoHints(t *testing.T) {
	models, encodings := testModels(t)
	backendStores(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		puts := 0
		e := engine.New(encodings, models, countPuts{st, &puts})
		v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "gpt-4", System: "sys"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: []chat.Message{userMsg("hi")}}); err != nil {
			t.Fatal(err)
		}
		if puts != 1 {
			t.Fatalf("first answer: %d writes of the prepared view, want 1", puts)
		}
		for i := 0; i < 3; i++ {
			res, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Cache.HasPrevious || res.Cache.StableMessages != 1 {
				t.Fatalf("hints of an unchanged answer: %+v", res.Cache)
			}
		}
		if puts != 1 {
			t.Fatalf("3 unchanged answers wrote the prepared view %d times", puts-1)
		}
		res, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: []chat.Message{userMsg("more")}})
		if err != nil {
			t.Fatal(err)
		}
		if puts != 2 || res.Cache.StableMessages != 1 {
			t.Fatalf("a changed answer: %d writes, %d stable messages; want 2 and 1", puts, res.Cache.StableMessages)
		}
	})
}
