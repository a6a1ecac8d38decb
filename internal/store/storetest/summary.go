package storetest

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/store"
)

// testListSummaries checks a listing's rows: no system prompt or tools (a
// multi-megabyte prompt is never read), the newest compaction (its short
// record, reverted or not) and both ledger kinds; a session never compacted
// or billed has none; ListFilter.ID selects one session.
func testListSummaries(t *testing.T, s store.Store) {
	ctx := t.Context()
	big := session("t", "big", epoch)
	big.SystemPrompt = strings.Repeat("p", 1<<20)
	big.CompactionRound = 2
	create(t, s, big)
	create(t, s, session("t", "plain", epoch.Add(time.Minute)))
	rec := func(id string, round int, tiers ...string) *store.Compaction {
		return &store.Compaction{ID: id, Round: round, Tiers: tiers, TokensBefore: int64(900 - round), TokensAfter: int64(400 + round),
			Items: []store.CompactionItem{{Tier: tiers[0], Replaced: []string{"m1"}, Reason: "r"}}, Summary: "long summary",
			ViewBefore: []string{"m1", "m2"}, ViewAfter: []string{"m2"}, CreatedAt: epoch.Add(time.Duration(round) * time.Hour),
			ExpiresAt: epoch.Add(48 * time.Hour)}
	}
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, c := range []*store.Compaction{rec("c1", 1, "prune"), rec("c2", 2, "prune", "summarize")} {
			if err := tx.InsertCompaction(ctx, "t", "big", c); err != nil {
				return err
			}
		}
		if err := tx.MarkReverted(ctx, "t", "big", "c2", epoch.Add(3*time.Hour)); err != nil {
			return err
		}
		if err := tx.AddLedger(ctx, "t", "big", store.LedgerCalls, store.LedgerTotals{Calls: 2, Input: 100, CacheRead: 300, Output: 20, CostNanoUSD: 7}); err != nil {
			return err
		}
		if err := tx.AddLedger(ctx, "t", "big", store.LedgerEstimated, store.LedgerTotals{Calls: 1, Input: 40, Output: 2, CostNanoUSD: 1}); err != nil {
			return err
		}
		return tx.AddLedger(ctx, "t", "big", store.LedgerOverhead, store.LedgerTotals{Calls: 1, Input: 50, Output: 5, CostNanoUSD: 3, Unpriced: 1})
	})
	rows, err := s.ListSessions(ctx, "t", store.ListFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].ID != "plain" || rows[1].ID != "big" {
		t.Fatalf("listing %+v, want plain then big", rows)
	}
	for _, r := range rows {
		if r.SystemPrompt != "" || len(r.Tools) != 0 {
			t.Errorf("%s: a listing row carries a system prompt of %d bytes and %d tools; want none", r.ID, len(r.SystemPrompt), len(r.Tools))
		}
		if r.SystemTokens != 10 || r.ToolsTokens != 20 || r.Labels["team"] != "a" || r.Policy.WarningThreshold == nil {
			t.Errorf("%s: row lost its counts, labels or policy: %+v", r.ID, r.Session)
		}
	}
	if plain := rows[0]; plain.LastCompaction != nil || plain.Ledger != (store.Ledger{}) {
		t.Errorf("a session never compacted or billed lists compaction %+v and ledger %+v", plain.LastCompaction, plain.Ledger)
	}
	reverted := epoch.Add(3 * time.Hour)
	want := &store.Compaction{ID: "c2", Round: 2, Tiers: []string{"prune", "summarize"}, TokensBefore: 898, TokensAfter: 402,
		CreatedAt: epoch.Add(2 * time.Hour), ExpiresAt: epoch.Add(48 * time.Hour), RevertedAt: &reverted}
	if got := rows[1].LastCompaction; !reflect.DeepEqual(got, want) {
		t.Errorf("last compaction\n got %+v\nwant %+v (short record of the newest round, reverted_at kept)", got, want)
	}
	wantLedger := store.Ledger{Calls: store.LedgerTotals{Calls: 2, Input: 100, CacheRead: 300, Output: 20, CostNanoUSD: 7},
		Overhead:  store.LedgerTotals{Calls: 1, Input: 50, Output: 5, CostNanoUSD: 3, Unpriced: 1},
		Estimated: store.LedgerTotals{Calls: 1, Input: 40, Output: 2, CostNanoUSD: 1}}
	if rows[1].Ledger != wantLedger {
		t.Errorf("ledger %+v, want %+v", rows[1].Ledger, wantLedger)
	}
	one, err := s.ListSessions(ctx, "t", store.ListFilter{ID: "big", Limit: 1})
	if err != nil || len(one) != 1 || one[0].ID != "big" || !reflect.DeepEqual(one[0], rows[1]) {
		t.Errorf("ListFilter.ID: %+v, %v; want the big session's row", one, err)
	}
	if none, err := s.ListSessions(ctx, "other", store.ListFilter{ID: "big", Limit: 1}); err != nil || len(none) != 0 {
		t.Errorf("another tenant's ListFilter.ID: %+v, %v; want nothing", none, err)
	}
}
