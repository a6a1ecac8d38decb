package compaction_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
)

// textOf is a message's text and tool output, as the model reads it.
func textOf(m *chat.Message) string {
	var b strings.Builder
	for _, p := range m.Parts {
		b.WriteString(p.Text)
		if p.ToolResult != nil {
			b.WriteString(p.ToolResult.Content)
		}
	}
	return b.String()
}

// With expose_expand_tool every kind of placeholder and summary names the
// id to pass contextd_expand: a pruned tool result and a long message
// their original's, a summary (even one whose summarizer wrote no header,
// as an LLM's) and a drop-middle placeholder their own.
func TestExpandToolWording(t *testing.T) {
	on := func(req *compaction.Request) { req.Policy.ExposeExpandTool = true }

	b := (&builder{}).user("Fix the bug.").steps(12, 2000, "c")
	req := request(b, 8000, compaction.TierPrune)
	on(&req)
	plan := mustPlan(t, req)
	if got := textOf(&plan.View[2]); !strings.Contains(got, `Call contextd_expand with id "m3" to read it.]`) || strings.Contains(got, "ExpandMessage") {
		t.Errorf("pruned tool result: %q", got)
	}

	b = (&builder{}).user("Fix the bug.").user(strings.Repeat("long request ", 600))
	for i := 0; i < 12; i++ {
		b.user(fmt.Sprintf("next %d", i))
	}
	req = request(b, 4000, compaction.TierPrune)
	on(&req)
	plan = mustPlan(t, req)
	if got := textOf(&plan.View[1]); plan.View[1].Kind != chat.KindPlaceholder || !strings.Contains(got, `Call contextd_expand with id "m2" to read them.]`) {
		t.Errorf("head and tail: %s %q", plan.View[1].Kind, got)
	}

	b = (&builder{}).user("Fix the bug.").steps(12, 2000, "c")
	req = request(b, 8000, compaction.TierSummarize)
	on(&req)
	var asked string
	req.Summarize = func(in compaction.SummaryInput) (string, error) { asked = in.ID; return "what happened", nil }
	plan = mustPlan(t, req)
	sum := plan.New[0]
	if want := compaction.SummaryHeader(1, sum.ID, compaction.ExpandByTool) + "what happened"; sum.Kind != chat.KindSummary || asked != sum.ID || textOf(&sum) != want ||
		!strings.Contains(want, `call contextd_expand with id "`+sum.ID+`" to read them.]`) {
		t.Errorf("summary %s (summarizer told %q): %q", sum.ID, asked, textOf(&sum))
	}

	b = (&builder{}).user("Fix the bug.")
	for i := 0; i < 8; i++ {
		b.user(fmt.Sprintf("request %d", i)).assistant(strings.Repeat("z", 3600))
	}
	req = request(b, 6000, compaction.TierSummarize, compaction.TierDropMiddle)
	on(&req)
	req.Summarize = func(compaction.SummaryInput) (string, error) { return "", errors.New("summarizer down") }
	plan = mustPlan(t, req)
	ph := plan.New[len(plan.New)-1]
	if got := textOf(&ph); !strings.Contains(got, `Call contextd_expand with id "`+ph.ID+`" to read them.]`) {
		t.Errorf("drop-middle placeholder %s: %q", ph.ID, got)
	}
}

// Without the option, summaries (an LLM's too) and drop-middle
// placeholders name their own id in the ExpandMessage wording, so turning
// the option on later lets the model pass it to contextd_expand.
func TestExpandWordingOffNamesIDs(t *testing.T) {
	b := (&builder{}).user("Fix the bug.").steps(12, 2000, "c")
	req := request(b, 8000, compaction.TierSummarize)
	req.Summarize = func(in compaction.SummaryInput) (string, error) { return "what happened", nil }
	plan := mustPlan(t, req)
	sum := plan.New[0]
	if want := compaction.SummaryHeader(1, sum.ID, compaction.ExpandByRPC) + "what happened"; sum.Kind != chat.KindSummary || textOf(&sum) != want ||
		!strings.Contains(want, "call ExpandMessage with message id "+sum.ID+" to read them.]") {
		t.Errorf("summary %s: %q", sum.ID, textOf(&sum))
	}

	b = (&builder{}).user("Fix the bug.")
	for i := 0; i < 8; i++ {
		b.user(fmt.Sprintf("request %d", i)).assistant(strings.Repeat("z", 3600))
	}
	req = request(b, 6000, compaction.TierSummarize, compaction.TierDropMiddle)
	req.Summarize = func(compaction.SummaryInput) (string, error) { return "", errors.New("summarizer down") }
	plan = mustPlan(t, req)
	ph := plan.New[len(plan.New)-1]
	if got := textOf(&ph); ph.Kind != chat.KindPlaceholder || !strings.Contains(got, "Call ExpandMessage with message id "+ph.ID+" to read them.]") {
		t.Errorf("drop-middle placeholder %s: %q", ph.ID, got)
	}
}

// Each placeholder and summary says what the model reading it can do, in
// each wording (Policy.Expander): call contextd_expand when the view
// carries it, ExpandMessage on the API (whose runtime offers it as a tool),
// and on the gateway with the tool off, nothing it cannot call: the id is
// named, and a tool's pruned output says to make the call again (issue 29).
func TestExpandWordingOfEachSurface(t *testing.T) {
	type want struct{ tool, rpc, none string }
	cases := []struct {
		name string
		plan func(req func(b *builder, window int64, tiers ...compaction.Tier) compaction.Request) (got string, id string)
		want func(id string) want
	}{{
		name: "pruned tool result",
		plan: func(req func(*builder, int64, ...compaction.Tier) compaction.Request) (string, string) {
			plan := mustPlan(t, req((&builder{}).user("Fix the bug.").steps(12, 2000, "c"), 8000, compaction.TierPrune))
			return textOf(&plan.View[2]), "m3"
		},
		want: func(id string) want {
			return want{`(506 tokens). Call contextd_expand with id "` + id + `" to read it.]`,
				"(506 tokens). Call ExpandMessage with message id " + id + " to read it.]",
				"(506 tokens). Its id is " + id + "; rerun the call if needed.]"}
		},
	}, {
		name: "older copy of a tool output",
		plan: func(req func(*builder, int64, ...compaction.Tier) compaction.Request) (string, string) {
			b := (&builder{}).user("Fix the bug.")
			for i := 0; i < 12; i++ {
				id := fmt.Sprintf("c%d", i)
				b.assistant("Step: I'll inspect the file.", id).result(id, strings.Repeat("the same output\n", 140))
			}
			plan := mustPlan(t, req(b, 8000, compaction.TierPrune))
			return textOf(&plan.View[2]), "m3"
		},
		want: func(id string) want {
			return want{`identical to the newer message m25). Call contextd_expand with id "` + id + `" to read it.]`,
				"identical to the newer message m25). Call ExpandMessage with message id " + id + " to read it.]",
				"identical to the newer message m25). Its id is " + id + ".]"}
		},
	}, {
		name: "long message's middle",
		plan: func(req func(*builder, int64, ...compaction.Tier) compaction.Request) (string, string) {
			b := (&builder{}).user("Fix the bug.").user(strings.Repeat("long request ", 600))
			for i := 0; i < 12; i++ {
				b.user(fmt.Sprintf("next %d", i))
			}
			plan := mustPlan(t, req(b, 4000, compaction.TierPrune))
			return textOf(&plan.View[1]), "m2"
		},
		want: func(id string) want {
			return want{`here. Call contextd_expand with id "` + id + `" to read them.]`,
				"here. Call ExpandMessage with message id " + id + " to read them.]",
				"here. Its id is " + id + ".]"}
		},
	}, {
		name: "oversized tool output's middle",
		plan: func(req func(*builder, int64, ...compaction.Tier) compaction.Request) (string, string) {
			b := (&builder{}).user("Fix the bug.").steps(2, 100, "c").assistant("", "big").result("big", strings.Repeat("y", 40_000))
			plan := mustPlan(t, req(b, 8000, compaction.AllTiers...))
			return textOf(&plan.View[len(plan.View)-1]), "m7"
		},
		want: func(id string) want {
			return want{`whole). Call contextd_expand with id "` + id + `" to read them.]`,
				"whole). Call ExpandMessage with message id " + id + " to read them.]",
				"whole). Its id is " + id + "; rerun the call if needed.]"}
		},
	}, {
		name: "client scaffolding",
		plan: func(req func(*builder, int64, ...compaction.Tier) compaction.Request) (string, string) {
			plan := mustPlan(t, req(afterCompact("Now recheck the notes."), 8000, compaction.AllTiers...))
			return textOf(&plan.View[len(plan.View)-1]), "m3"
		},
		want: func(id string) want {
			return want{`window. Call contextd_expand with id "` + id + `" to read it.]`,
				"window. Call ExpandMessage with message id " + id + " to read it.]",
				"window. Its id is " + id + ".]"}
		},
	}, {
		name: "summary",
		plan: func(req func(*builder, int64, ...compaction.Tier) compaction.Request) (string, string) {
			plan := mustPlan(t, req((&builder{}).user("Fix the bug.").steps(12, 2000, "c"), 8000, compaction.TierSummarize))
			return textOf(&plan.New[0]), plan.New[0].ID
		},
		want: func(id string) want {
			h := "[contextd summary, round 1. It stands in for earlier messages of this conversation; "
			return want{h + `call contextd_expand with id "` + id + `" to read them.]` + "\n",
				h + "call ExpandMessage with message id " + id + " to read them.]\n",
				h + "its id is " + id + ".]\n"}
		},
	}, {
		name: "dropped turns",
		plan: func(req func(*builder, int64, ...compaction.Tier) compaction.Request) (string, string) {
			b := (&builder{}).user("Fix the bug.")
			for i := 0; i < 8; i++ {
				b.user(fmt.Sprintf("request %d", i)).assistant(strings.Repeat("z", 3600))
			}
			r := req(b, 6000, compaction.TierSummarize, compaction.TierDropMiddle)
			r.Summarize = func(compaction.SummaryInput) (string, error) { return "", errors.New("summarizer down") }
			plan := mustPlan(t, r)
			ph := plan.New[len(plan.New)-1]
			return textOf(&ph), ph.ID
		},
		want: func(id string) want {
			return want{`window. Call contextd_expand with id "` + id + `" to read them.]`,
				"window. Call ExpandMessage with message id " + id + " to read them.]",
				"window. Its id is " + id + ".]"}
		},
	}}
	for _, c := range cases {
		for _, s := range []struct {
			name      string
			tool, rpc bool
			pick      func(want) string
		}{
			{"tool", true, false, func(w want) string { return w.tool }},
			{"tool beside no rpc", true, true, func(w want) string { return w.tool }},
			{"rpc", false, false, func(w want) string { return w.rpc }},
			{"none", false, true, func(w want) string { return w.none }},
		} {
			req := func(b *builder, window int64, tiers ...compaction.Tier) compaction.Request {
				r := request(b, window, tiers...)
				r.Policy.ExposeExpandTool, r.Policy.NoExpandRPC = s.tool, s.rpc
				return r
			}
			got, id := c.plan(req)
			if w := s.pick(c.want(id)); !strings.Contains(got, w) {
				t.Errorf("%s, %s: %q lacks %q", c.name, s.name, got, w)
			}
			if s.name == "none" && (strings.Contains(got, "Call") || strings.Contains(got, "ExpandMessage") || strings.Contains(got, compaction.ExpandToolName)) {
				t.Errorf("%s, %s: tells the model to call what it cannot: %q", c.name, s.name, got)
			}
		}
	}
}
