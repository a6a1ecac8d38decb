package engine_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

// TestPrepareAnswerIsByteBounded: a view over MaxResponseBytes (a window of
// 128k tokens holds far more than 64 KB) is RESOURCE_EXHAUSTED naming
// CONTEXTD_MAX_RESPONSE_BYTES, and the call changes nothing; with the
// view_token of the view the caller holds, only what changed is sent, and
// that fits. Both backends.
func TestPrepareAnswerIsByteBounded(t *testing.T) {
	models, encodings := testModels(t)
	backendStores(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		unbounded := engine.New(encodings, models, st)
		e := engine.New(encodings, models, st, engine.WithLimits(engine.Limits{MaxResponseBytes: 64 << 10}))
		off := false
		v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "gpt-4o", Policy: compaction.Overrides{AutoCompact: &off}})
		if err != nil {
			t.Fatal(err)
		}
		var big []chat.Message
		for i := 0; i < 10; i++ {
			big = append(big, userMsg(strings.Repeat("The quick brown fox jumps over the lazy dog. ", 250))) // ~11 KB each
		}
		held, err := unbounded.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: big})
		if err != nil {
			t.Fatal(err)
		}
		before, _ := e.GetSession(ctx, tenant, v.ID)
		for _, in := range []engine.PrepareInput{{}, {Messages: []chat.Message{userMsg("and one more")}}} {
			_, err := e.PrepareContext(ctx, tenant, v.ID, in)
			if !errors.Is(err, engine.ErrResourceExhausted) || !strings.Contains(err.Error(), "CONTEXTD_MAX_RESPONSE_BYTES") {
				t.Errorf("a 110 KB view under a 64 KB cap: %v; want ResourceExhausted naming CONTEXTD_MAX_RESPONSE_BYTES", err)
			}
		}
		if after, _ := e.GetSession(ctx, tenant, v.ID); after.Version != before.Version || after.LogCount != before.LogCount {
			t.Errorf("a refused PrepareContext changed the session: version %d→%d, log %d→%d", before.Version, after.Version, before.LogCount, after.LogCount)
		}
		res, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{ViewToken: held.ViewToken, Messages: []chat.Message{userMsg("and one more")}})
		if err != nil || !res.Delta || len(res.Messages) != 1 {
			t.Fatalf("with the held view's token: %d messages (delta %v), %v", len(res.Messages), res.Delta, err)
		}
	})
}
