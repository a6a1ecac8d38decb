package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/postgres"
)

// TestPrepareRecordsEditsWithTheAppend: client edits passed to
// PrepareContext (PrepareInput.Edits) are written in its transaction:
// with a stale version, or an append that fails, nothing is recorded; a
// call that appends and compacts (the edits make the view pass the
// compaction threshold) records the edit and the compaction in order,
// the edit's record first, and the view counts the client's version.
func TestPrepareRecordsEditsWithTheAppend(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v := agentSession(t, e, compaction.Overrides{}, 8)
		start, err := e.GetSession(ctx, tenant, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		longer := "step 0: " + strings.Repeat("the whole file, longer than it was ", 400)
		edits := []engine.ViewEdit{{Client: &engine.ClientEditInput{Client: func(stored *chat.Message) (chat.Message, bool) {
			if stored.Role != chat.RoleTool || resultText(stored) == longer || !strings.HasPrefix(resultText(stored), "step 0:") {
				return chat.Message{}, false
			}
			m := *stored
			m.Parts = []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: stored.Parts[0].ToolResult.ToolCallID, Content: longer}}}
			return m, true
		}}}}
		count := func() int {
			page, err := e.ListCompactions(ctx, tenant, v.ID, engine.Page{Size: 100})
			if err != nil {
				t.Fatal(err)
			}
			return len(page.Compactions)
		}
		// A stale version: nothing.
		stale := start.Version - 1
		if _, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: []chat.Message{userMsg("go on")}, ExpectedVersion: &stale, Edits: edits}); !errors.Is(err, store.ErrVersionConflict) {
			t.Fatalf("stale version: %v, want a version conflict", err)
		}
		// An append that fails (a result without its call): nothing.
		expected := start.Version
		if _, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: []chat.Message{resultMsg("nope", "x")}, ExpectedVersion: &expected, Edits: edits}); err == nil {
			t.Fatal("an append of a result without its call was taken")
		}
		if n := count(); n != 0 {
			t.Fatalf("%d compactions after failed calls, want none", n)
		}
		// The edit makes the view pass the threshold: edit and compaction
		// in one call.
		res, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: []chat.Message{userMsg("go on")}, ExpectedVersion: &expected, Edits: edits})
		if err != nil {
			t.Fatal(err)
		}
		page, err := e.ListCompactions(ctx, tenant, v.ID, engine.Page{Size: 100})
		if err != nil {
			t.Fatal(err)
		}
		var tiers []string
		for _, c := range page.Compactions {
			tiers = append(tiers, strings.Join(c.Tiers, "+"))
		}
		t.Logf("compacted %v, used %d, records %v", res.Status.Compacted, res.Status.Usage.Used, tiers)
		if !res.Status.Compacted || len(page.Compactions) != 2 || !strings.Contains(strings.Join(tiers, " "), engine.ClientEditTier) {
			t.Fatalf("compacted %v, records %v; want the client edit and a compaction", res.Status.Compacted, tiers)
		}
		after, err := e.GetSession(ctx, tenant, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status.Version != after.Version || after.Version <= start.Version+1 {
			t.Errorf("status version %d, session %d (started at %d)", res.Status.Version, after.Version, start.Version)
		}
		var sum int64
		for _, m := range activeOf(t, e, v.ID) {
			sum += m.Tokens
		}
		if sum != after.ActiveTokens {
			t.Errorf("the view counts %d tokens, the session %d", sum, after.ActiveTokens)
		}
	})
}

// viewWrites counts the views a transaction replaces and the tenant's log
// size it reads.
type viewWrites struct {
	store.Store
	replaced, quota int
}

func (v *viewWrites) InTx(ctx context.Context, fn func(context.Context, store.Tx) error) error {
	return v.Store.InTx(ctx, func(ctx context.Context, tx store.Tx) error { return fn(ctx, viewWritesTx{tx, v}) })
}

type viewWritesTx struct {
	store.Tx
	v *viewWrites
}

func (t viewWritesTx) ReplaceView(ctx context.Context, tenant, id string, ids []string) error {
	t.v.replaced++
	return t.Tx.ReplaceView(ctx, tenant, id, ids)
}

func (t viewWritesTx) CheckLogBytes(ctx context.Context, tenant string, quota int64, over error) error {
	t.v.quota++
	return t.Tx.CheckLogBytes(ctx, tenant, quota, over)
}

// TestPrepareWritesTheEditsViewOnce: three client edits in one
// PrepareContext call write the view once (the last edit's) and read the
// tenant's log quota once, with a record each and the view holding all
// three versions; before, each edit wrote a view generation of its own
// (the ones between replaced in the same transaction) and read the quota.
func TestPrepareWritesTheEditsViewOnce(t *testing.T) {
	models, encodings := testModels(t)
	w := &viewWrites{Store: openSQLite(t)}
	e := engine.New(encodings, models, w, engine.WithLimits(engine.Limits{MaxLogBytesPerTenant: 1 << 30}))
	ctx := t.Context()
	v := agentSession(t, e, compaction.Overrides{}, 4)
	start, err := e.GetSession(ctx, tenant, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	var edits []engine.ViewEdit
	for _, step := range []string{"step 0:", "step 1:", "step 2:"} {
		edits = append(edits, engine.ViewEdit{Client: &engine.ClientEditInput{Client: func(stored *chat.Message) (chat.Message, bool) {
			if stored.Role != chat.RoleTool || !strings.HasPrefix(resultText(stored), step) {
				return chat.Message{}, false
			}
			m := *stored
			m.Parts = []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: stored.Parts[0].ToolResult.ToolCallID, Content: step + " cleared"}}}
			return m, true
		}}})
	}
	w.replaced, w.quota = 0, 0
	expected := start.Version
	if _, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{ExpectedVersion: &expected, Edits: edits}); err != nil {
		t.Fatal(err)
	}
	if w.replaced != 1 || w.quota != 1 {
		t.Errorf("three edits replaced the view %d times and read the quota %d times, want once each", w.replaced, w.quota)
	}
	page, err := e.ListCompactions(ctx, tenant, v.ID, engine.Page{Size: 100})
	if err != nil {
		t.Fatal(err)
	}
	cleared := 0
	for _, m := range activeOf(t, e, v.ID) {
		if strings.HasSuffix(resultText(&m), " cleared") {
			cleared++
		}
	}
	if len(page.Compactions) != 3 || cleared != 3 {
		t.Fatalf("%d records, %d cleared results in the view; want 3 and 3", len(page.Compactions), cleared)
	}
}

// TestPrepareEditsRoundTripsToPostgres counts, through a proxy in front
// of a real PostgreSQL (pgtest.RoundTrips), the round trips of a
// PrepareContext call that records a client edit with its append: the
// view's new generation, its flip and the edit's record ride with the
// transaction's reads and its commit (store.Pipelined): 23 round trips
// for the whole call (its reads, the sweep of the replaced generation);
// before, 28 (the view's stage, its flip and the record each went in a
// round trip of its own), then 24 until a multi-row read carried the
// writes queued before it.
func TestPrepareEditsRoundTripsToPostgres(t *testing.T) {
	url, trips := pgtest.RoundTrips(t, pgtest.URL(t))
	s, err := postgres.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	models, encodings := testModels(t)
	e := engine.New(encodings, models, s)
	ctx := t.Context()
	v := agentSession(t, e, compaction.Overrides{}, 4)
	start, err := e.GetSession(ctx, tenant, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	edit := engine.ViewEdit{Client: &engine.ClientEditInput{Client: func(stored *chat.Message) (chat.Message, bool) {
		if stored.Role != chat.RoleTool || !strings.HasPrefix(resultText(stored), "step 0:") {
			return chat.Message{}, false
		}
		m := *stored
		m.Parts = []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: stored.Parts[0].ToolResult.ToolCallID, Content: "step 0: cleared"}}}
		return m, true
	}}}
	expected := start.Version
	before := trips()
	if _, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: []chat.Message{userMsg("go on")}, ExpectedVersion: &expected, Edits: []engine.ViewEdit{edit}}); err != nil {
		t.Fatal(err)
	}
	n := trips() - before
	t.Logf("%d round trips", n)
	if n > 23 {
		t.Errorf("%d round trips to PostgreSQL for an edit with its append, want at most 23", n)
	}
}
