package engine_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

// TestReportUsageNamesItsView: ReportUsage with the view_token of the view
// that was sent anchors and calibrates with that view while the session
// only grew; after a compaction rewrote the view it still calibrates with
// the view the latest PrepareContext returned (not the compacted one) and
// anchors nothing; for an older view it only records the call in the
// ledger. Both backends.
func TestReportUsageNamesItsView(t *testing.T) {
	models, encodings := testModels(t)
	backendStores(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		e := engine.New(encodings, models, st)
		off := false
		v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "claude-sonnet-4-5", System: "You are a coding agent.",
			Policy: compaction.Overrides{AutoCompact: &off}})
		if err != nil {
			t.Fatal(err)
		}
		step := 0
		turn := func() []chat.Message {
			step++
			id := fmt.Sprintf("call_%d", step)
			return []chat.Message{userMsg(fmt.Sprintf("step %d", step)), callMsg(id),
				resultMsg(id, strings.Repeat(fmt.Sprintf("func f%d() { return x } ", step), 80))}
		}
		// billed is what a provider whose tokenizer counts 1.25× ours bills
		// for the view a PrepareContext returned.
		billed := func(res engine.PrepareResult) int64 {
			s, err := e.GetSession(ctx, tenant, v.ID)
			if err != nil {
				t.Fatal(err)
			}
			local := s.SystemTokens + s.ToolsTokens + 3 // reply priming
			for _, m := range res.Messages {
				local += m.Tokens
			}
			return int64(math.Round(1.25 * float64(local)))
		}
		calibration := func() store.Calibration {
			c, err := st.GetCalibration(ctx, tenant, "claude-sonnet-4-5")
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				t.Fatal(err)
			}
			return c
		}
		report := func(token string, input int64) engine.Usage {
			t.Helper()
			u, err := e.ReportUsage(ctx, tenant, v.ID, engine.ReportInput{InputTokens: input, OutputTokens: 10, ViewToken: token})
			if err != nil {
				t.Fatal(err)
			}
			return u
		}

		// The view only grew since: anchored to that prefix, calibrated.
		first, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: turn()})
		if err != nil {
			t.Fatal(err)
		}
		input := billed(first)
		if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: turn()}); err != nil {
			t.Fatal(err)
		}
		u := report(first.ViewToken, input)
		s, _ := e.GetSession(ctx, tenant, v.ID)
		if u.Source != engine.SourceAnchored || s.AnchorInput != input || s.AnchorCount != int64(len(first.Messages)) {
			t.Errorf("grown view: %v, anchor %d over %d messages; want %d over %d", u.Source, s.AnchorInput, s.AnchorCount, input, len(first.Messages))
		}
		if c := calibration(); c.Samples != 1 || math.Abs(c.Ratio-1.25) > 0.01 {
			t.Errorf("calibration after the first report: %+v", c)
		}

		// Compacted between PrepareContext and the report.
		for range 4 {
			if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: turn()}); err != nil {
				t.Fatal(err)
			}
		}
		sent, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: turn()})
		if err != nil {
			t.Fatal(err)
		}
		input = billed(sent)
		low := 0.02
		if res, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{Tier: compaction.TierPrune, Target: &low}); err != nil || !res.Compacted {
			t.Fatalf("compact: %+v, %v", res, err)
		}
		before, _ := e.GetSession(ctx, tenant, v.ID)
		u = report(sent.ViewToken, input)
		after, _ := e.GetSession(ctx, tenant, v.ID)
		if c := calibration(); c.Samples != 2 || math.Abs(c.Ratio-1.25) > 0.01 {
			t.Errorf("calibration from the view sent before a compaction: %+v; want ratio 1.25 from 2 samples", c)
		}
		if u.Source == engine.SourceAnchored || after.AnchorInput == input {
			t.Errorf("anchored to a view that is no longer the session's: %v, anchor %d", u.Source, after.AnchorInput)
		}
		if after.Version != before.Version+1 || len(u.Warnings) != 0 {
			t.Errorf("version %d→%d, warnings %v", before.Version, after.Version, u.Warnings)
		}

		// A view older than the latest PrepareContext's, rewritten since:
		// in the ledger only.
		old, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: turn()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: turn()}); err != nil {
			t.Fatal(err)
		}
		if res, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{Tier: compaction.TierPrune, Target: &low}); err != nil || !res.Compacted {
			t.Fatalf("compact: %+v, %v", res, err)
		}
		ledger, _ := st.GetLedger(ctx, tenant, v.ID)
		u = report(old.ViewToken, billed(old)*3) // 3.75×: would be refused as implausible if it were matched
		if c := calibration(); c.Samples != 2 {
			t.Errorf("a report on an unknown view calibrated: %+v", c)
		}
		if len(u.Warnings) != 1 || !strings.Contains(u.Warnings[0], "ledger") {
			t.Errorf("warnings %v; want one saying the call is only in the ledger", u.Warnings)
		}
		if l, _ := st.GetLedger(ctx, tenant, v.ID); l.Calls.Calls != ledger.Calls.Calls+1 {
			t.Errorf("ledger calls %d → %d", ledger.Calls.Calls, l.Calls.Calls)
		}

		// A token not issued for this session.
		other, _ := e.CreateSession(ctx, tenant, engine.NewSession{Model: "claude-sonnet-4-5"})
		otherRes, err := e.PrepareContext(ctx, tenant, other.ID, engine.PrepareInput{Messages: []chat.Message{userMsg("hi")}})
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{"nonsense", otherRes.ViewToken} {
			_, err := e.ReportUsage(ctx, tenant, v.ID, engine.ReportInput{InputTokens: 100, ViewToken: bad})
			var invalid *chat.InvalidError
			if !errors.As(err, &invalid) || !strings.Contains(err.Error(), "view_token") {
				t.Errorf("token %q: %v; want InvalidArgument naming view_token", bad, err)
			}
		}
	})
}
