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

// failAfterCommit is a real store whose ledger read fails: what
// PrepareContext reads after its append committed.
type failAfterCommit struct{ store.Store }

func (s failAfterCommit) GetLedger(context.Context, string, string) (store.Ledger, error) {
	return store.Ledger{}, errInjected
}

// failHints is a real store whose cache-hint write fails.
type failHints struct{ store.Store }

func (s failHints) InTx(ctx context.Context, fn func(ctx context.Context, tx store.Tx) error) error {
	return s.Store.InTx(ctx, func(ctx context.Context, tx store.Tx) error { return fn(ctx, failHintsTx{tx}) })
}

type failHintsTx struct{ store.Tx }

func (failHintsTx) PutPreparedView(context.Context, string, string, store.PreparedView) error {
	return errInjected
}

// TestPrepareCommittedIsAnswered: once the append is stored, a failure of
// the ledger read is a warning on the answer, never the call's error (a
// retry would append again without an idempotency key).
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
		if w := strings.Join(res.Status.Warnings, " "); !strings.Contains(w, "ledger") {
			t.Fatalf("warnings %q do not name the ledger", w)
		}
		log, err := e.GetMessages(ctx, tenant, v.ID, engine.ViewLog, engine.Page{})
		if err != nil || len(log.Messages) != 1 {
			t.Fatalf("log: %v, %v", log.Messages, err)
		}
		// A caller that reads no ledger (the gateway) has none read.
		res, err = faulty.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: []chat.Message{userMsg("more")}, NoLedger: true})
		if err != nil || res.Status.Ledger != nil || strings.Contains(strings.Join(res.Status.Warnings, " "), "ledger") {
			t.Fatalf("NoLedger: ledger %v, warnings %q, %v", res.Status.Ledger, res.Status.Warnings, err)
		}
	})
}

// TestPrepareHintsInTheAppend: the cache-hints row is written in the
// append's transaction, so a PrepareContext that appends commits once, and
// a hints row that cannot be written fails the call with nothing appended
// (before, the row was a second transaction after the append's commit).
func TestPrepareHintsInTheAppend(t *testing.T) {
	models, encodings := testModels(t)
	backendStores(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		txs := 0
		e := engine.New(encodings, models, countTxs{st, &txs})
		v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "gpt-4", System: "sys"})
		if err != nil {
			t.Fatal(err)
		}
		for i, text := range []string{"hi", "more", "and more"} {
			txs = 0
			res, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: []chat.Message{userMsg(text)}})
			if err != nil {
				t.Fatal(err)
			}
			if txs != 1 {
				t.Fatalf("call %d: %d transactions, want 1", i+1, txs)
			}
			if res.Cache.HasPrevious != (i > 0) || res.Cache.StableMessages != int64(i) {
				t.Fatalf("call %d: hints %+v", i+1, res.Cache)
			}
		}
		faulty := engine.New(encodings, models, failHints{st})
		if _, err := faulty.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: []chat.Message{userMsg("lost")}}); !errors.Is(err, errInjected) {
			t.Fatalf("PrepareContext whose hints row failed: %v, want the injected error", err)
		}
		log, err := e.GetMessages(ctx, tenant, v.ID, engine.ViewLog, engine.Page{})
		if err != nil || len(log.Messages) != 3 {
			t.Fatalf("log after the failed call: %d messages, %v; want 3", len(log.Messages), err)
		}
	})
}

// countTxs is a real store that counts its transactions.
type countTxs struct {
	store.Store
	n *int
}

func (s countTxs) InTx(ctx context.Context, fn func(ctx context.Context, tx store.Tx) error) error {
	*s.n++
	return s.Store.InTx(ctx, fn)
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
