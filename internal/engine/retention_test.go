package engine_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

// TestRetentionKeepsNestedOriginals: after repeated compactions a summary
// replaces an earlier summary; once retention has run (every compaction past
// its revert window), every original reachable from the active view by
// ExpandMessage, at any depth, is still there.
func TestRetentionKeepsNestedOriginals(t *testing.T) {
	models, encodings := testModels(t)
	backendStores(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		e := engine.New(encodings, models, st)
		v := agentSession(t, e, compaction.Overrides{}, 8)
		low := 0.05
		nested := false
		for round := 0; round < 4; round++ {
			msgs := []chat.Message{userMsg(fmt.Sprintf("round %d", round))}
			for i := 0; i < 6; i++ {
				id := fmt.Sprintf("r%d_%d", round, i)
				msgs = append(msgs, callMsg(id), resultMsg(id, strings.Repeat(fmt.Sprintf("round %d output %d ", round, i), 60)))
			}
			if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: msgs}); err != nil {
				t.Fatal(err)
			}
			res, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{Tier: compaction.TierSummarize, Target: &low})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Compacted {
				t.Fatalf("round %d did not compact", round)
			}
			for _, it := range res.Compaction.Items {
				for _, r := range it.Replaced {
					if got, err := st.MessagesByID(ctx, tenant, v.ID, []string{r}); err == nil && got[0].Kind != chat.KindNormal {
						nested = true
					}
				}
			}
		}
		if !nested {
			t.Fatal("no compaction replaced a summary or placeholder: the test does not exercise nesting")
		}
		later := time.Now().Add(72 * time.Hour)
		p, err := st.Purge(ctx, later, later)
		if err != nil {
			t.Fatal(err)
		}
		view, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{})
		if err != nil {
			t.Fatal(err)
		}
		reached := 0
		var expand func(id string, depth int)
		expand = func(id string, depth int) {
			x, err := e.ExpandMessage(ctx, tenant, v.ID, id, "")
			if err != nil {
				t.Fatalf("expand %s (depth %d) after retention purged %+v: %v", id, depth, p, err)
			}
			reached++
			for _, o := range x.Originals {
				expand(o.ID, depth+1)
			}
		}
		for _, m := range view.Messages {
			expand(m.ID, 0)
		}
		if reached <= len(view.Messages) {
			t.Errorf("expanding reached %d messages from a view of %d", reached, len(view.Messages))
		}
	})
}
