package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

// heldStore counts, for every transaction, the view and message rows it
// reads and writes while it holds the writer (including the store's own
// reads made meanwhile), and can fail the n-th transaction, as a crash
// between two batches would end a call.
type heldStore struct {
	store.Store
	open, rows, most, txs, failAt int
	longest                       time.Duration // the longest transaction
}

var errCrash = errors.New("injected: the store failed between batches")

func (h *heldStore) reset(failAt int) { h.most, h.txs, h.failAt, h.longest = 0, 0, failAt, 0 }

func (h *heldStore) timed(start time.Time) { h.longest = max(h.longest, time.Since(start)) }

func (h *heldStore) InTx(ctx context.Context, fn func(context.Context, store.Tx) error) error {
	h.txs++
	if h.txs == h.failAt {
		return errCrash
	}
	h.open, h.rows = h.open+1, 0
	defer h.timed(time.Now())
	defer func() { h.open--; h.most = max(h.most, h.rows) }()
	return h.Store.InTx(ctx, func(ctx context.Context, tx store.Tx) error { return fn(ctx, heldTx{tx, h}) })
}

func (h *heldStore) held(n int) {
	if h.open > 0 {
		h.rows += n
	}
}

func (h *heldStore) ActiveMessages(ctx context.Context, tenant, id string, after int64, limit int) ([]chat.Message, []int64, error) {
	msgs, ords, err := h.Store.ActiveMessages(ctx, tenant, id, after, limit)
	h.held(len(msgs))
	return msgs, ords, err
}

func (h *heldStore) MessagesByID(ctx context.Context, tenant, id string, ids []string) ([]chat.Message, error) {
	msgs, err := h.Store.MessagesByID(ctx, tenant, id, ids)
	h.held(len(msgs))
	return msgs, err
}

func (h *heldStore) SweepViews(ctx context.Context, tenant, id string, limit int) (int, error) {
	h.txs++
	defer h.timed(time.Now())
	n, err := h.Store.SweepViews(ctx, tenant, id, limit)
	h.most = max(h.most, n)
	return n, err
}

type heldTx struct {
	store.Tx
	h *heldStore
}

func (t heldTx) ViewMessages(ctx context.Context, tenant, id string) ([]chat.Message, error) {
	msgs, err := t.Tx.ViewMessages(ctx, tenant, id)
	t.h.rows += len(msgs)
	return msgs, err
}

func (t heldTx) MessagesByID(ctx context.Context, tenant, id string, ids []string) ([]chat.Message, error) {
	msgs, err := t.Tx.MessagesByID(ctx, tenant, id, ids)
	t.h.rows += len(msgs)
	return msgs, err
}

func (t heldTx) ReplaceView(ctx context.Context, tenant, id string, ids []string) error {
	t.h.rows += len(ids)
	return t.Tx.ReplaceView(ctx, tenant, id, ids)
}

func (t heldTx) StageView(ctx context.Context, tenant, id string, gen int64, entries []store.ViewEntry) error {
	t.h.rows += len(entries)
	return t.Tx.StageView(ctx, tenant, id, gen, entries)
}

func (t heldTx) AppendView(ctx context.Context, tenant, id string, entries []store.ViewEntry) error {
	t.h.rows += len(entries)
	return t.Tx.AppendView(ctx, tenant, id, entries)
}

func (t heldTx) SetMessageTokens(ctx context.Context, tenant, id string, tokens map[string]int64, countedFor string) error {
	t.h.rows += len(tokens)
	return t.Tx.SetMessageTokens(ctx, tenant, id, tokens, countedFor)
}

// TestRewritesHoldTheWriterABatch: reverting a compaction of a 2,400-
// message view and clearing it read and write at most one batch (500) of
// rows in any one transaction, the store's own reads while a transaction
// is open included; before, the revert read and rewrote the whole view in
// one (4,800 rows) and the clear read it (2,400). A store that fails
// between two batches of the revert leaves the view as it was, readers
// never see a partial view, the revert then succeeds, and nothing staged
// is left behind. On both stores.
func TestRewritesHoldTheWriterABatch(t *testing.T) {
	const n, batch = 2400, 500
	defer engine.SetViewBatch(batch)()
	backendStores(t, func(t *testing.T, s store.Store) {
		models, encodings := testModels(t)
		h := &heldStore{Store: s}
		e := engine.New(encodings, models, h)
		ctx := t.Context()
		keepTokens, keepMessages, target := int64(200), 4, 0.01
		v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "gpt-4o",
			Policy: compaction.Overrides{KeepRecentTokens: &keepTokens, KeepRecentMessages: &keepMessages}})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i += 400 {
			var batch []chat.Message
			for j := i; j < i+400; j += 2 {
				batch = append(batch, userMsg(fmt.Sprintf("step %d: %s", j, strings.Repeat("word ", 20))),
					chat.Message{Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText, Text: fmt.Sprint("done ", j)}}})
			}
			if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: batch}); err != nil {
				t.Fatal(err)
			}
		}
		activeLen := func() int {
			msgs, _, err := s.ActiveMessages(ctx, tenant, v.ID, 0, 3*n)
			if err != nil {
				t.Fatal(err)
			}
			return len(msgs)
		}
		res, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{Tier: compaction.TierSummarize, Target: &target})
		if err != nil || res.Compaction == nil || len(res.Compaction.ViewBefore) != n {
			t.Fatalf("compact: %+v, %v", res.Compaction, err)
		}
		compacted := activeLen()
		if compacted >= n/2 {
			t.Fatalf("the compaction left %d of %d messages", compacted, n)
		}

		// A store failing at the third staging batch: the call fails, and
		// the view is what it was.
		h.reset(3)
		if _, err := e.RevertCompaction(ctx, tenant, v.ID, res.Compaction.ID); !errors.Is(err, errCrash) {
			t.Fatalf("revert with the store failing: %v; want the injected failure", err)
		}
		if got := activeLen(); got != compacted {
			t.Fatalf("after a revert that failed between batches the view has %d messages; want %d", got, compacted)
		}
		h.reset(0)
		stop := readWhile(t, s, v.ID, compacted, n)
		_, err = e.RevertCompaction(ctx, tenant, v.ID, res.Compaction.ID)
		stop()
		if err != nil {
			t.Fatal(err)
		}
		if got := activeLen(); got != n {
			t.Fatalf("after the revert the view has %d messages; want %d", got, n)
		}
		t.Logf("revert: %d transactions, at most %d rows in one", h.txs, h.most)
		if h.most > batch {
			t.Errorf("the revert held the writer over %d rows in one transaction; want at most %d", h.most, batch)
		}
		if left, err := s.SweepViews(ctx, tenant, v.ID, 10*n); err != nil || left != 0 {
			t.Errorf("after the revert %d view rows were left to sweep (%v); want none", left, err)
		}

		h.reset(0)
		stop = readWhile(t, s, v.ID, n, 0)
		_, err = e.ClearMessages(ctx, tenant, v.ID, false, nil)
		stop()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("clear: %d transactions, at most %d rows in one", h.txs, h.most)
		if h.most > batch {
			t.Errorf("the clear held the writer over %d rows in one transaction; want at most %d", h.most, batch)
		}
		if got := activeLen(); got != 0 {
			t.Fatalf("after the clear the view has %d messages", got)
		}
		if left, err := s.SweepViews(ctx, tenant, v.ID, 10*n); err != nil || left != 0 {
			t.Errorf("after the clear %d view rows were left to sweep (%v); want none", left, err)
		}
		// The clear is revertible: the whole view comes back.
		list, err := compactionsOf(e, ctx, tenant, v.ID)
		if err != nil || len(list) != 2 {
			t.Fatalf("compactions: %d, %v", len(list), err)
		}
		if _, err := e.RevertCompaction(ctx, tenant, v.ID, list[1].ID); err != nil {
			t.Fatal(err)
		}
		if got := activeLen(); got != n {
			t.Fatalf("after reverting the clear the view has %d messages; want %d", got, n)
		}
	})
}

// readWhile reads the session's active view over and over, as another
// client would, until stop is called, and fails the test if a read sees
// anything but a view of before or after messages: a rewrite is atomic
// for readers.
func readWhile(t *testing.T, s store.Store, id string, before, after int) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	reads := 0
	wg.Go(func() {
		for {
			msgs, _, err := s.ActiveMessages(context.Background(), tenant, id, 0, 3*max(before, after)+1)
			if err != nil {
				t.Error(err)
				return
			}
			if len(msgs) != before && len(msgs) != after {
				t.Errorf("a reader saw a view of %d messages during a rewrite from %d to %d", len(msgs), before, after)
				return
			}
			reads++
			select {
			case <-done:
				return
			default:
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		if reads == 0 {
			t.Error("no read happened during the rewrite")
		}
	}
}

// BenchmarkRewriteLargeView clears a view of 20,000 messages and reverts
// the clear, and reports the longest single transaction of each against
// the whole call: the writer is held a batch at a time (before, each call
// was one transaction holding it throughout).
//
//	go test -run '^$' -bench RewriteLargeView -benchtime 3x ./internal/engine/
func BenchmarkRewriteLargeView(b *testing.B) {
	const n = 20_000
	for _, backend := range []string{"sqlite", "postgres"} {
		b.Run(fmt.Sprintf("%s/messages=%d", backend, n), func(b *testing.B) {
			models, encodings := testModels(b)
			h := &heldStore{Store: benchStore(b, backend)}
			e := engine.New(encodings, models, h)
			ctx := b.Context()
			v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "gpt-4.1"})
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < n; i += 1000 {
				var batch []chat.Message
				for j := i; j < i+1000; j++ {
					batch = append(batch, userMsg(fmt.Sprintf("step %d", j)))
				}
				if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: batch}); err != nil {
					b.Fatal(err)
				}
			}
			var clearTx, revertTx, clearCall, revertCall time.Duration
			b.ResetTimer()
			for b.Loop() {
				h.reset(0)
				start := time.Now()
				res, err := e.ClearMessages(ctx, tenant, v.ID, false, nil)
				if err != nil {
					b.Fatal(err)
				}
				clearCall, clearTx = clearCall+time.Since(start), clearTx+h.longest
				h.reset(0)
				start = time.Now()
				if _, err := e.RevertCompaction(ctx, tenant, v.ID, res.Compaction.ID); err != nil {
					b.Fatal(err)
				}
				revertCall, revertTx = revertCall+time.Since(start), revertTx+h.longest
			}
			k := float64(b.N)
			b.ReportMetric(clearCall.Seconds()*1000/k, "clear-ms")
			b.ReportMetric(clearTx.Seconds()*1000/k, "clear-longest-tx-ms")
			b.ReportMetric(revertCall.Seconds()*1000/k, "revert-ms")
			b.ReportMetric(revertTx.Seconds()*1000/k, "revert-longest-tx-ms")
		})
	}
}
