package engine_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
)

// TestCalibration simulates a provider whose true counts are a fixed
// multiple of our local count (Claude's tokenizer runs ~30 % above
// cl100k_base on code): after three reports, the next estimate of a grown
// session, and of a fresh session of the same model, is within 3 % of the
// truth.
func TestCalibration(t *testing.T) {
	for _, factor := range []float64{1.3, 0.9} {
		t.Run(fmt.Sprint(factor), func(t *testing.T) {
			backends(t, func(t *testing.T, e *engine.Engine) {
				ctx := t.Context()
				v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "claude-sonnet-4-5", System: "You are a coding agent."})
				if err != nil {
					t.Fatal(err)
				}
				// truth is what the simulated provider would bill for the
				// session's current request.
				truth := func(id string) int64 {
					s, err := e.GetSession(ctx, tenant, id)
					if err != nil {
						t.Fatal(err)
					}
					local := s.SystemTokens + s.ToolsTokens + s.ActiveTokens + 3 // reply priming
					return int64(math.Round(factor * float64(local)))
				}
				before, _ := e.SessionUsage(ctx, tenant, v.ID)
				if before.Source != engine.SourceEstimated || before.ExpectedError != 0.20 {
					t.Errorf("before any report: %v ±%v", before.Source, before.ExpectedError)
				}
				step := func(i int) {
					if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: []chat.Message{
						userMsg(fmt.Sprintf("step %d: %s", i, strings.Repeat("func main() { fmt.Println(x) } ", 40)))}}); err != nil {
						t.Fatal(err)
					}
				}
				for i := 0; i < 3; i++ {
					step(i)
					cur, _ := e.GetSession(ctx, tenant, v.ID)
					ver := cur.Version
					u, err := e.ReportUsage(ctx, tenant, v.ID, engine.ReportInput{InputTokens: truth(v.ID) - 40, CacheReadTokens: 40, Version: &ver})
					if err != nil {
						t.Fatal(err)
					}
					if u.Source != engine.SourceAnchored || u.Used != truth(v.ID) {
						t.Errorf("right after report %d: %v %d, truth %d", i+1, u.Source, u.Used, truth(v.ID))
					}
				}
				step(3)
				step(4)
				u, err := e.SessionUsage(ctx, tenant, v.ID)
				if err != nil {
					t.Fatal(err)
				}
				if off := math.Abs(float64(u.Used-truth(v.ID))) / float64(truth(v.ID)); off > 0.03 || u.Source != engine.SourceAnchored {
					t.Errorf("anchored estimate %d vs truth %d: %.1f%% off (%v)", u.Used, truth(v.ID), 100*off, u.Source)
				}
				// A fresh session of the same model: calibrated, not anchored.
				w, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "claude-sonnet-4-5", System: "Be brief."})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := e.AppendMessages(ctx, tenant, w.ID, engine.AppendInput{Messages: []chat.Message{
					userMsg(strings.Repeat("SELECT * FROM users WHERE id = 1; ", 60))}}); err != nil {
					t.Fatal(err)
				}
				fresh, _ := e.SessionUsage(ctx, tenant, w.ID)
				if off := math.Abs(float64(fresh.Used-truth(w.ID))) / float64(truth(w.ID)); off > 0.03 || fresh.Source != engine.SourceCalibrated || fresh.ExpectedError != 0.02 {
					t.Errorf("calibrated estimate %d vs truth %d: %.1f%% off (%v ±%v)", fresh.Used, truth(w.ID), 100*off, fresh.Source, fresh.ExpectedError)
				}
				// Exact models are never scaled.
				g, _ := e.CreateSession(ctx, tenant, engine.NewSession{Model: "gpt-4o"})
				if gu, _ := e.SessionUsage(ctx, tenant, g.ID); gu.Source != engine.SourceEstimated || gu.ExpectedError != 0 {
					t.Errorf("exact model: %v ±%v", gu.Source, gu.ExpectedError)
				}
			})
		})
	}
}

func TestReportUsageValidation(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v := agentSession(t, e, compaction.Overrides{}, 4)
		stale := int64(1)
		if _, err := e.ReportUsage(ctx, tenant, v.ID, engine.ReportInput{InputTokens: 100, Version: &stale}); err == nil ||
			!strings.Contains(err.Error(), "moved on") {
			t.Errorf("stale version: %v", err)
		}
		tooMany := int64(99)
		if _, err := e.ReportUsage(ctx, tenant, v.ID, engine.ReportInput{InputTokens: 100, MessageCount: &tooMany}); err == nil {
			t.Error("message_count beyond the view was accepted")
		}
		if _, err := e.ReportUsage(ctx, tenant, v.ID, engine.ReportInput{}); err == nil {
			t.Error("zero input tokens were accepted")
		}
		// An anchor does not survive a compaction of the view it described.
		two := int64(5)
		if _, err := e.ReportUsage(ctx, tenant, v.ID, engine.ReportInput{InputTokens: 5000, MessageCount: &two}); err != nil {
			t.Fatal(err)
		}
		low := 0.05
		if _, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{Target: &low}); err != nil {
			t.Fatal(err)
		}
		if u, _ := e.SessionUsage(ctx, tenant, v.ID); u.Source == engine.SourceAnchored {
			t.Errorf("still anchored after a compaction: %d", u.Used)
		}
	})
}

// TestReportAddedLocalTokens: a call that sent the view and more (the
// gateway's expand loop) calibrates with the extra counted in, and does
// not anchor the session: a fresh session of the model is estimated at the
// provider's true factor, not inflated by the extra.
func TestReportAddedLocalTokens(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		const factor, added = 1.3, 4000
		v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "claude-sonnet-4-5", System: "You are a coding agent."})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: []chat.Message{
			userMsg(strings.Repeat("func main() { fmt.Println(x) } ", 60))}}); err != nil {
			t.Fatal(err)
		}
		s, _ := e.GetSession(ctx, tenant, v.ID)
		local := s.SystemTokens + s.ToolsTokens + s.ActiveTokens + 3
		ver := s.Version
		for range 3 {
			u, err := e.ReportUsage(ctx, tenant, v.ID, engine.ReportInput{Version: &ver,
				InputTokens: int64(math.Round(factor * float64(local+added))), AddedLocalTokens: added})
			if err != nil {
				t.Fatal(err)
			}
			ver++
			if u.Source == engine.SourceAnchored {
				t.Fatalf("a report of more than the view anchored the session at %d", u.Used)
			}
		}
		w, _ := e.CreateSession(ctx, tenant, engine.NewSession{Model: "claude-sonnet-4-5", System: "You are a coding agent."})
		if _, err := e.AppendMessages(ctx, tenant, w.ID, engine.AppendInput{Messages: []chat.Message{
			userMsg(strings.Repeat("func main() { fmt.Println(x) } ", 60))}}); err != nil {
			t.Fatal(err)
		}
		fresh, _ := e.SessionUsage(ctx, tenant, w.ID)
		if got := float64(fresh.Used) / float64(local); math.Abs(got-factor) > 0.03 {
			t.Errorf("calibrated factor %.2f; want %.2f: the added tokens were not counted locally", got, factor)
		}
	})
}
