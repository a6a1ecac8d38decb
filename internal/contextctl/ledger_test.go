package contextctl

import (
	"testing"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

func TestRenderLedger(t *testing.T) {
	for _, tc := range []struct {
		name string
		l    *contextdv1.Ledger
		want string
	}{
		{"nothing reported", nil, ""},
		{"calls", &contextdv1.Ledger{Calls: &contextdv1.LedgerTotals{Calls: 12, InputTokens: 4_000, CacheReadTokens: 90_000,
			CacheWriteTokens: 6_000, OutputTokens: 2_500, CostUsd: 0.0601}, CacheHitRate: 0.9, TotalCostUsd: 0.0601},
			"Cost 12 calls · cache hit 90.0% · $0.0601 · input 4.0k, cache reads 90k, cache writes 6.0k, output 2.5k\n"},
		{"overhead and unpriced", &contextdv1.Ledger{Calls: &contextdv1.LedgerTotals{Calls: 2, InputTokens: 100, UnpricedCalls: 2},
			CompactionOverhead: &contextdv1.LedgerTotals{Calls: 1, CostUsd: 0.002}, TotalCostUsd: 0.002},
			"Cost 2 calls · cache hit 0.0% · $0.0020 (compaction overhead $0.0020 in 1 calls) · input 100, cache reads 0, cache writes 0, output 0 · 2 calls unpriced\n"},
		{"estimated", &contextdv1.Ledger{Calls: &contextdv1.LedgerTotals{Calls: 3, InputTokens: 300, OutputTokens: 30},
			Estimated: &contextdv1.LedgerTotals{Calls: 1, InputTokens: 100, OutputTokens: 5}},
			"Cost 3 calls (1 estimated: a stream cut before its usage) · cache hit 0.0% · $0.0000 · input 300, cache reads 0, cache writes 0, output 30\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := RenderLedger(tc.l); got != tc.want {
				t.Errorf("RenderLedger =\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}
