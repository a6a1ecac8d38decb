package engine_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
)

// TestReportFarFromExactCountDoesNotAnchor: for an exact encoding,
// contextd's own count is the count. A report of the request that is far
// from it (an upstream that always answers 1,000 input tokens) goes into
// the ledger with a warning but never anchors the session: the usage
// stays contextd's count, so compaction still happens when the view
// grows. A report within a few percent anchors (uncached + cache reads +
// cache writes is the used count right after it). Before the fix the
// 1,000-token report anchored, and the session looked 1,000 tokens full.
func TestReportFarFromExactCountDoesNotAnchor(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "gpt-4o", System: "You are a coding agent."})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: []chat.Message{
			userMsg(strings.Repeat("func main() { fmt.Println(x) } ", 400))}}); err != nil {
			t.Fatal(err)
		}
		local, err := e.SessionUsage(ctx, tenant, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		if local.Used < 3000 {
			t.Fatalf("local count %d: the test needs a bigger view", local.Used)
		}
		report := func(uncached, read, write int64) engine.Usage {
			t.Helper()
			s, err := e.GetSession(ctx, tenant, v.ID)
			if err != nil {
				t.Fatal(err)
			}
			ver := s.Version
			u, err := e.ReportUsage(ctx, tenant, v.ID, engine.ReportInput{InputTokens: uncached, CacheReadTokens: read, CacheCreationTokens: write, OutputTokens: 10, Version: &ver})
			if err != nil {
				t.Fatal(err)
			}
			return u
		}
		// Too small, and too large: ledgered, warned, not anchored.
		for _, total := range []int64{1000, local.Used * 2} {
			u := report(total/2, total-total/2, 0)
			if u.Used != local.Used || u.Source == engine.SourceAnchored {
				t.Errorf("a report of %d input tokens against an exact count of %d: used %d (%v), want %d not anchored", total, local.Used, u.Used, u.Source, local.Used)
			}
			if !strings.Contains(fmt.Sprint(u.Warnings), "exact count") {
				t.Errorf("a report of %d input tokens: warnings %q do not say it disagrees with the exact count", total, u.Warnings)
			}
		}
		// Within a few percent (a provider's framing of tools may differ a
		// little): anchored, the used count is the provider's.
		total := local.Used + local.Used/50
		u := report(total-3000, 2000, 1000)
		if u.Used != total || u.Source != engine.SourceAnchored {
			t.Errorf("a report of %d (uncached %d + read 2000 + write 1000): used %d (%v), want %d anchored", total, total-3000, u.Used, u.Source, total)
		}
		g, err := e.GetSession(ctx, tenant, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		l := g.Ledger.Calls
		if l.Calls != 3 || l.Input != 1000/2+local.Used+total-3000 || l.CacheRead != 1000/2+local.Used+2000 || l.CacheWrite != 1000 || l.Output != 30 {
			t.Errorf("ledger %+v: every report is in it, field by field", l)
		}
	})
}

// TestReportFarBelowApproximateCountDoesNotAnchor: for an approximate
// encoding the provider's count anchors the session, but not a report
// below half of contextd's own count (an upstream that always answers
// 1,000 input tokens): that would make the view look a fraction of its
// size and stop compaction. A report far above still anchors (the safe
// direction: images, documents contextd estimates low). Before the fix
// the 1,000-token report anchored.
func TestReportFarBelowApproximateCountDoesNotAnchor(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "claude-sonnet-4-5", System: "You are a coding agent."})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: []chat.Message{
			userMsg(strings.Repeat("func main() { fmt.Println(x) } ", 400))}}); err != nil {
			t.Fatal(err)
		}
		local, err := e.SessionUsage(ctx, tenant, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		report := func(input int64) engine.Usage {
			t.Helper()
			s, err := e.GetSession(ctx, tenant, v.ID)
			if err != nil {
				t.Fatal(err)
			}
			ver := s.Version
			u, err := e.ReportUsage(ctx, tenant, v.ID, engine.ReportInput{InputTokens: input, OutputTokens: 10, Version: &ver})
			if err != nil {
				t.Fatal(err)
			}
			return u
		}
		u := report(1000)
		if u.Used < local.Used || u.Source == engine.SourceAnchored || !strings.Contains(fmt.Sprint(u.Warnings), "nor anchored") {
			t.Errorf("a report of 1000 input tokens against a count of %d: used %d (%v), warnings %q; want at least %d, not anchored, said so", local.Used, u.Used, u.Source, u.Warnings, local.Used)
		}
		u = report(local.Used * 3)
		if u.Used != local.Used*3 || u.Source != engine.SourceAnchored {
			t.Errorf("a report of %d (3× the count): used %d (%v), want it anchored", local.Used*3, u.Used, u.Source)
		}
	})
}
