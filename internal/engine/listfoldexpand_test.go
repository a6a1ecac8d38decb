package engine_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
)

// TestListFoldIDsExpandToWhatTheyFold: through the engine, two chained
// summaries at a small summary_max_tokens fold their Decisions; every id a
// fold line names resolves through the expand tool, and every decision
// the session's agent wrote is verbatim in the view, an entry of the latest
// summary or in the text those ids expand to (one expand away).
func TestListFoldIDsExpandToWhatTheyFold(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		p := exposeExpand()
		small, low := 256, 0.05
		p.SummaryMaxTokens = &small
		v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "gpt-4", System: "You are a coding agent.", Policy: p})
		if err != nil {
			t.Fatal(err)
		}
		var decisions []string
		steps := func(from, to int) []chat.Message {
			var msgs []chat.Message
			for i := from; i < to; i++ {
				d := fmt.Sprintf("The issue is in step %d of the parser module number %d.", i, i*7)
				decisions = append(decisions, d)
				id := fmt.Sprintf("call_%d", i)
				m := callMsg(id)
				m.Parts = append([]chat.Part{{Type: chat.PartText, Text: d}}, m.Parts...)
				msgs = append(msgs, m, resultMsg(id, fmt.Sprintf("step %d: %s", i, strings.Repeat("lorem ipsum dolor ", 60))))
			}
			return msgs
		}
		if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: append([]chat.Message{userMsg("Fix the parser.")}, steps(0, 14)...)}); err != nil {
			t.Fatal(err)
		}
		if c, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{Tier: compaction.TierSummarize, Target: &low}); err != nil || !c.Compacted {
			t.Fatalf("first summary: %+v, %v", c, err)
		}
		if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: steps(100, 114)}); err != nil {
			t.Fatal(err)
		}
		second, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{Tier: compaction.TierSummarize, Target: &low})
		if err != nil || !second.Compacted {
			t.Fatalf("second summary: %+v, %v", second, err)
		}
		text := second.Compaction.Summary
		_, sec, _ := strings.Cut(text, "## Decisions\n")
		sec, _, _ = strings.Cut(sec, "\n## ")
		m := regexp.MustCompile(`(?m)^- folded: (\d+) earlier entries, in (.+)$`).FindStringSubmatch(sec)
		if m == nil {
			t.Fatalf("Decisions folds nothing:\n%s", text)
		}
		var expanded strings.Builder
		for _, id := range strings.Split(m[2], ", ") {
			all, _ := readAll(t, e, tenant, v.ID, id, 1<<20) // fails on an id the session does not have
			expanded.WriteString(all)
		}
		page, err := e.GetMessages(ctx, tenant, v.ID, engine.ViewActive, engine.Page{Size: 1000})
		if err != nil {
			t.Fatal(err)
		}
		var view strings.Builder
		for _, m := range page.Messages {
			if m.Kind != chat.KindSummary {
				for _, part := range m.Parts {
					view.WriteString(part.Text + "\n")
				}
			}
		}
		for _, d := range decisions {
			if !strings.Contains(sec, "- "+d+"\n") && !strings.Contains(expanded.String(), d) && !strings.Contains(view.String(), d) {
				t.Errorf("decision %q neither in the summary nor one expand away (fold %q)", d, m[0])
			}
		}
	})
}
