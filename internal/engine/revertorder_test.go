package engine_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

// TestRevertOrderIgnoresReplicaClocks: two replicas (engines over one store)
// whose clocks differ by 5 s. Replica A clears the session (cmp_1), messages
// are appended, and replica B, behind, prunes them (cmp_2, round 2, created
// earlier by its clock). cmp_1 cannot be reverted while cmp_2 is applied:
// the order of compactions is their round, never a replica's clock. Then
// cmp_2 and cmp_1 revert in turn, and ListCompactions lists them by round.
func TestRevertOrderIgnoresReplicaClocks(t *testing.T) {
	models, encodings := testModels(t)
	backendStores(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		base := time.Now()
		a := engine.New(encodings, models, st, engine.WithClock(func() time.Time { return base.Add(time.Since(base)) }))
		b := engine.New(encodings, models, st, engine.WithClock(func() time.Time { return base.Add(time.Since(base) - 5*time.Second) }))
		off := false
		v := agentSession(t, a, compaction.Overrides{AutoCompact: &off}, 4)
		cleared, err := a.ClearMessages(ctx, tenant, v.ID, false, nil)
		if err != nil || cleared.Compaction == nil {
			t.Fatalf("clear: %+v, %v", cleared, err)
		}
		msgs := []chat.Message{userMsg("Start over: fix src/db.py.")}
		for i := 0; i < 4; i++ {
			id := fmt.Sprintf("again_%d", i)
			msgs = append(msgs, callMsg(id), resultMsg(id, strings.Repeat("lorem ipsum dolor ", 100)))
		}
		if _, err := b.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: msgs}); err != nil {
			t.Fatal(err)
		}
		low := 0.01
		pruned, err := b.Compact(ctx, tenant, v.ID, engine.CompactInput{Tier: compaction.TierPrune, Target: &low})
		if err != nil || pruned.Compaction == nil {
			t.Fatalf("prune: %+v, %v", pruned, err)
		}
		first, second := cleared.Compaction, pruned.Compaction
		if second.Round != first.Round+1 || !second.CreatedAt.Before(first.CreatedAt) {
			t.Fatalf("want a later round created earlier: %s round %d at %v, %s round %d at %v",
				first.ID, first.Round, first.CreatedAt, second.ID, second.Round, second.CreatedAt)
		}
		list, err := compactionsOf(a, ctx, tenant, v.ID)
		if err != nil || len(list) != 2 || list[0].ID != first.ID || list[1].ID != second.ID {
			t.Errorf("ListCompactions: %+v, %v; want %s then %s (by round)", list, err, first.ID, second.ID)
		}
		for _, e := range []*engine.Engine{a, b} {
			if _, err := e.RevertCompaction(ctx, tenant, v.ID, first.ID); !errors.Is(err, engine.ErrFailedPrecondition) || !strings.Contains(err.Error(), second.ID) {
				t.Fatalf("revert of %s while %s is applied: %v; want FailedPrecondition naming %s", first.ID, second.ID, err, second.ID)
			}
		}
		if _, err := a.RevertCompaction(ctx, tenant, v.ID, second.ID); err != nil {
			t.Fatalf("revert of %s: %v", second.ID, err)
		}
		back, err := b.RevertCompaction(ctx, tenant, v.ID, first.ID)
		if err != nil {
			t.Fatalf("revert of %s after %s: %v", first.ID, second.ID, err)
		}
		if back.ActiveCount != 1+8+1+8 {
			t.Errorf("after both reverts the view holds %d messages; want the 9 before the clear and the 9 appended", back.ActiveCount)
		}
	})
}
