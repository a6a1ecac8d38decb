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

// TestHandoffFoldIDsExpandOnTheirSession: a hand-off's fold line names
// ids of the session it was written from ("… in sum_2_1, sum_1_1 of
// session s_old", docs/api.md): ExpandMessage on that session reads each
// of them (the summary and its originals, the folded entries among them),
// while the new session seeded with the document does not hold them.
// Two summaries at a cap of 200 tokens fold most of 60 distinct errors.
func TestHandoffFoldIDsExpandOnTheirSession(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		capTokens := 200
		v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "gpt-4", System: "You are a coding agent.",
			Policy: compaction.Overrides{SummaryMaxTokens: &capTokens}})
		if err != nil {
			t.Fatal(err)
		}
		step := 0
		appendSteps := func(first bool) {
			var msgs []chat.Message
			if first {
				msgs = append(msgs, userMsg("Fix the failing test in src/app.py."))
			}
			for range 30 {
				id := fmt.Sprintf("call_%d", step)
				msgs = append(msgs, callMsg(id), resultMsg(id, fmt.Sprintf("ValueError: bad value %d in module_%d\n%s", step, step, strings.Repeat("lorem ipsum ", 40))))
				step++
			}
			if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: msgs}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{Tier: compaction.TierSummarize}); err != nil {
				t.Fatal(err)
			}
		}
		appendSteps(true)
		appendSteps(false)
		h, err := e.CreateHandoff(ctx, tenant, v.ID, engine.HandoffInput{NewSession: true})
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?m)^- folded: \d+ earlier entries, in (.+) of session (\S+)$`).FindStringSubmatch(h.Document)
		if m == nil {
			t.Fatalf("no fold line names its session's ids:\n%s", h.Document)
		}
		if m[2] != v.ID {
			t.Errorf("the fold line names session %q, want %q", m[2], v.ID)
		}
		var behind strings.Builder // the originals of the ids named
		for _, id := range strings.Split(m[1], ", ") {
			x, err := e.ExpandMessage(ctx, tenant, m[2], id, "")
			if err != nil {
				t.Errorf("ExpandMessage(%s, %s): %v", m[2], id, err)
				continue
			}
			for i := range x.Originals {
				for _, p := range x.Originals[i].Parts {
					if p.ToolResult != nil {
						behind.WriteString(p.ToolResult.Content + "\n")
					}
					behind.WriteString(p.Text + "\n")
				}
			}
			if x.Message.Kind != chat.KindSummary || len(x.Originals) == 0 {
				t.Errorf("ExpandMessage(%s, %s): a %s with %d originals", m[2], id, x.Message.Kind, len(x.Originals))
			}
			if _, err := e.ExpandMessage(ctx, tenant, h.Session.ID, id, ""); err == nil {
				t.Errorf("the new session %s holds %s too; the fold line was meant for the old one", h.Session.ID, id)
			}
		}
		// Every error the document does not show is behind those ids, or,
		// counted apart ("in session s_old"), in that session's view.
		if strings.Contains(h.Document, "earlier entries, in session "+v.ID+"\n") {
			view, err := e.GetMessages(ctx, tenant, v.ID, engine.ViewActive, engine.Page{})
			if err != nil {
				t.Fatal(err)
			}
			for i := range view.Messages {
				for _, p := range view.Messages[i].Parts {
					if p.ToolResult != nil {
						behind.WriteString(p.ToolResult.Content + "\n")
					}
					behind.WriteString(p.Text + "\n")
				}
			}
		}
		missing := 0
		for i := range step {
			e := fmt.Sprintf("ValueError: bad value %d in module_%d\n", i, i)
			if !strings.Contains(h.Document, e) && !strings.Contains(behind.String(), e) {
				missing++
			}
		}
		if missing > 0 {
			t.Errorf("%d of %d errors neither in the hand-off nor behind the ids its fold line names:\n%s", missing, step, h.Document)
		}
	})
}
