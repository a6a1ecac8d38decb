package compaction_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
)

// count is a stand-in tokenizer for planner tests: 4 framing tokens plus one
// per 4 bytes of content.
func count(m *chat.Message) int64 {
	n := 0
	for _, p := range m.Parts {
		switch p.Type {
		case chat.PartText:
			n += len(p.Text)
		case chat.PartToolCall:
			n += len(p.ToolCall.Name) + len(p.ToolCall.Arguments)
		case chat.PartToolResult:
			n += len(p.ToolResult.Content)
		}
	}
	return int64(4 + n/4)
}

type builder struct {
	msgs []chat.Message
	next int
}

func (b *builder) add(m chat.Message) *builder {
	b.next++
	m.ID = fmt.Sprintf("m%d", b.next)
	m.Kind = chat.KindNormal
	if m.Kind == "" {
		m.Kind = chat.KindNormal
	}
	m.Tokens = count(&m)
	b.msgs = append(b.msgs, m)
	return b
}

func (b *builder) user(text string) *builder {
	return b.add(chat.Message{Role: chat.RoleUser, Parts: []chat.Part{{Type: chat.PartText, Text: text}}})
}

func (b *builder) assistant(text string, calls ...string) *builder {
	m := chat.Message{Role: chat.RoleAssistant}
	if text != "" {
		m.Parts = append(m.Parts, chat.Part{Type: chat.PartText, Text: text})
	}
	for _, c := range calls {
		m.Parts = append(m.Parts, chat.Part{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: c, Name: "bash", Arguments: `{"command":"cat src/app.py"}`}})
	}
	return b.add(m)
}

func (b *builder) result(call, content string) *builder {
	return b.add(chat.Message{Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: call, Content: content}}}})
}

// steps appends n agent steps: an assistant call and its result of size bytes.
func (b *builder) steps(n, size int, prefix string) *builder {
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("%s%d", prefix, i)
		b.assistant(fmt.Sprintf("Step %s: I'll inspect the file.", id), id)
		b.result(id, fmt.Sprintf("output %s: %s", id, strings.Repeat("x", size)))
	}
	return b
}

func request(b *builder, window int64, tiers ...compaction.Tier) compaction.Request {
	policy := compaction.Defaults(window)
	ids := 0
	return compaction.Request{
		View: b.msgs, OriginalTaskID: "m1", Fixed: 100, Window: window, Policy: policy, Target: policy.Target,
		Tiers: tiers, Round: 1, Count: count,
		Summarize: func(in compaction.SummaryInput) (string, error) {
			return fmt.Sprintf("summary round %d of %d messages (previous: %q)", in.Round, len(in.Messages), in.Previous), nil
		},
		NewID: func(k chat.Kind) string { ids++; return fmt.Sprintf("%s-%d", k, ids) },
	}
}

func usable(r compaction.Request) int64 { return r.Window - r.Policy.ReservedOutputTokens }

func mustPlan(t *testing.T, req compaction.Request) *compaction.Plan {
	t.Helper()
	plan, err := compaction.PlanCompaction(req)
	if err != nil {
		t.Fatal(err)
	}
	if err := compaction.ValidatePairs(plan.View); err != nil {
		t.Fatalf("pairs: %v", err)
	}
	return plan
}

func ids(msgs []chat.Message) string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.ID)
	}
	return strings.Join(out, " ")
}

func TestNothingToDoBelowTarget(t *testing.T) {
	b := (&builder{}).user("Fix the bug.").steps(3, 100, "c")
	plan := mustPlan(t, request(b, 100_000, compaction.AllTiers...))
	if plan.Changed() || ids(plan.View) != ids(b.msgs) {
		t.Errorf("changed a view below target: %+v", plan.Items)
	}
}

func TestPruneOldToolResults(t *testing.T) {
	b := (&builder{}).user("Fix the bug.").steps(12, 2000, "c") // ~12 × 500 tokens
	req := request(b, 8000, compaction.TierPrune)
	plan := mustPlan(t, req)
	if !plan.Changed() || plan.Tiers[0] != compaction.TierPrune || plan.TokensAfter > int64(req.Target*float64(usable(req))) {
		t.Fatalf("prune: tiers %v, %d → %d tokens", plan.Tiers, plan.TokensBefore, plan.TokensAfter)
	}
	// The newest three results are protected; pruned ones keep their call id
	// and say how to expand them.
	last := plan.View[len(plan.View)-6:]
	for _, m := range last {
		if m.Kind != chat.KindNormal {
			t.Errorf("recent message %s was pruned", m.ID)
		}
	}
	ph := plan.View[2]
	if ph.Kind != chat.KindPlaceholder || ph.Parts[0].ToolResult.ToolCallID != "c0" ||
		!strings.Contains(ph.Parts[0].ToolResult.Content, "ExpandMessage with message id m3") {
		t.Errorf("placeholder: %+v", ph.Parts[0].ToolResult)
	}
	if plan.Items[0].Replaced[0] != "m3" || plan.Items[0].TokensBefore <= plan.Items[0].TokensAfter {
		t.Errorf("record: %+v", plan.Items[0])
	}
}

// TestPruneCountsEachPlaceholderOnce: a masked placeholder (an old tool
// output, a long message's head and tail) is counted once, by masked, not
// again when it replaces its message. Counting it again in replace made
// it two calls a placeholder.
func TestPruneCountsEachPlaceholderOnce(t *testing.T) {
	long := "HEAD " + strings.Repeat("middle ", 2000) + " TAIL"
	b := (&builder{}).user("Fix the bug.").assistant(long).steps(12, 2000, "c")
	req := request(b, 8000, compaction.TierPrune)
	calls := 0
	req.Count = func(m *chat.Message) int64 { calls++; return count(m) }
	plan := mustPlan(t, req)
	reasons := map[string]int{}
	for _, it := range plan.Items {
		reasons[it.Reason]++
	}
	if reasons["old tool output"] == 0 || reasons["long message: kept head and tail"] == 0 {
		t.Fatalf("placeholders %v; want both kinds masking makes", reasons)
	}
	if calls != len(plan.Items) {
		t.Errorf("%d counts for %d placeholders; want one each", calls, len(plan.Items))
	}
}

func TestPruneDuplicatesKeepsNewest(t *testing.T) {
	same := strings.Repeat("identical listing\n", 100)
	b := (&builder{}).user("Fix the bug.")
	b.assistant("", "a").result("a", same).assistant("", "b").result("b", same)
	b.steps(4, 40, "z") // newest results are small and protected
	req := request(b, 4000, compaction.TierPrune)
	req.Target = 0.05
	plan := mustPlan(t, req)
	var dup *compaction.Replacement
	for i := range plan.Items {
		if strings.HasPrefix(plan.Items[i].Reason, "duplicate") {
			dup = &plan.Items[i]
		}
	}
	if dup == nil || dup.Replaced[0] != "m3" || dup.Reason != "duplicate of m5" {
		t.Fatalf("items: %+v", plan.Items)
	}
}

func TestPruneLongMessageKeepsHeadAndTail(t *testing.T) {
	long := "HEAD " + strings.Repeat("middle ", 2000) + " TAIL"
	b := (&builder{}).user("Fix the bug.").assistant(long).user("ok").assistant("done")
	for i := 0; i < 10; i++ {
		b.user(fmt.Sprintf("question %d", i)).assistant("answer")
	}
	req := request(b, 8000, compaction.TierPrune)
	plan := mustPlan(t, req)
	m := plan.View[1]
	text := m.Parts[0].Text
	if m.Kind != chat.KindPlaceholder || !strings.HasPrefix(text, "HEAD ") || !strings.HasSuffix(text, " TAIL") || !strings.Contains(text, "pruned") {
		t.Errorf("long message: kind %s, %d bytes", m.Kind, len(text))
	}
}

func TestSummarizeNeverSplitsToolPairs(t *testing.T) {
	// Parallel tool calls near the cut: the tail must start at a clean
	// boundary, never with a tool result whose call was summarized.
	b := (&builder{}).user("Fix the bug.").steps(10, 800, "c")
	b.assistant("Running three checks at once.", "p1", "p2", "p3").result("p1", strings.Repeat("a", 900)).
		result("p2", strings.Repeat("b", 900)).result("p3", strings.Repeat("c", 900))
	b.steps(2, 200, "d")
	for _, keep := range []int64{300, 600, 900, 1200, 1500} {
		req := request(b, 6000, compaction.TierSummarize)
		req.Policy.KeepRecentTokens = keep
		plan := mustPlan(t, req)
		if !plan.Changed() {
			t.Fatalf("keep %d: nothing summarized", keep)
		}
		if plan.View[0].ID != "m1" || plan.View[1].Kind != chat.KindSummary {
			t.Errorf("keep %d: view starts %s", keep, ids(plan.View[:2]))
		}
		if plan.View[2].Role == chat.RoleTool {
			t.Errorf("keep %d: tail starts with a tool result", keep)
		}
	}
}

func TestAllRecentHistory(t *testing.T) {
	// Two turns, each large: the only clean cut keeps the latest turn.
	b := (&builder{}).user("Fix the bug.").assistant(strings.Repeat("thinking ", 700)).
		user("Now the second part.").assistant(strings.Repeat("more ", 900))
	req := request(b, 6000, compaction.TierSummarize, compaction.TierDropMiddle)
	plan := mustPlan(t, req)
	if plan.TokensAfter > usable(req) {
		t.Fatalf("does not fit: %d > %d", plan.TokensAfter, usable(req))
	}
	if plan.View[len(plan.View)-2].ID != "m3" {
		t.Errorf("latest user message lost: %s", ids(plan.View))
	}
}

func TestOneHugeRecentToolOutput(t *testing.T) {
	b := (&builder{}).user("Fix the bug.").steps(2, 100, "c").assistant("", "big").result("big", strings.Repeat("y", 40_000))
	req := request(b, 8000, compaction.AllTiers...)
	// The newest result is protected, and larger than the window alone:
	// it keeps its head and tail (oversized.go). It was ErrTooLarge, on
	// every later request of the conversation too.
	plan0 := mustPlan(t, req)
	if plan0.TokensAfter > usable(req) {
		t.Fatalf("does not fit: %d > %d", plan0.TokensAfter, usable(req))
	}
	last := plan0.View[len(plan0.View)-1]
	if out := last.Parts[0].ToolResult; out == nil || out.ToolCallID != "big" || !strings.HasPrefix(out.Content, "yyyy") ||
		!strings.HasSuffix(out.Content, "yyyy") || !strings.Contains(out.Content, "contextd pruned") {
		t.Errorf("the huge newest output: %+v", last.Parts[0])
	}
	// Without the prune tier it cannot fit.
	if _, err := compaction.PlanCompaction(request(b, 8000, compaction.TierSummarize, compaction.TierDropMiddle)); !errors.Is(err, compaction.ErrTooLarge) ||
		!strings.Contains(err.Error(), "largest message (m7, tool)") {
		t.Fatalf("without pruning: got %v", err)
	}
	// The same output further back is pruned away instead.
	b.user("Thanks, now something else.").steps(4, 100, "d")
	plan := mustPlan(t, request(b, 8000, compaction.AllTiers...))
	if plan.TokensAfter > usable(req) {
		t.Errorf("old huge output still there: %d tokens", plan.TokensAfter)
	}
}

func TestPinnedAloneTooLarge(t *testing.T) {
	b := (&builder{}).user("Fix the bug.")
	b.add(chat.Message{Role: chat.RoleUser, Pinned: true, Parts: []chat.Part{{Type: chat.PartText, Text: strings.Repeat("spec ", 8000)}}})
	b.assistant("ok")
	_, err := compaction.PlanCompaction(request(b, 8000, compaction.AllTiers...))
	if !errors.Is(err, compaction.ErrTooLarge) || !strings.Contains(err.Error(), "pinned") {
		t.Fatalf("got %v", err)
	}
}

func TestSummaryRounds(t *testing.T) {
	b := (&builder{}).user("Fix the bug.").steps(10, 2000, "r1-")
	req := request(b, 8000, compaction.TierSummarize)
	plan := mustPlan(t, req)
	view := plan.View
	for round := 2; round <= 3; round++ {
		nb := &builder{msgs: view, next: 1000 * round}
		nb.user(fmt.Sprintf("round %d follow-up", round)).steps(10, 2000, fmt.Sprintf("r%d-", round))
		req := request(nb, 8000, compaction.TierSummarize)
		req.Round = round
		plan = mustPlan(t, req)
		var sum *chat.Message
		for i := range plan.View {
			if plan.View[i].Kind == chat.KindSummary {
				if sum != nil {
					t.Fatalf("round %d: two summaries in the view", round)
				}
				sum = &plan.View[i]
			}
		}
		if sum == nil || !strings.Contains(sum.Parts[0].Text, fmt.Sprintf("summary round %d", round)) ||
			!strings.Contains(sum.Parts[0].Text, fmt.Sprintf("summary round %d", round-1)) {
			t.Fatalf("round %d summary: %+v", round, sum)
		}
		integrated := false
		for _, id := range plan.Items[len(plan.Items)-1].Replaced {
			if strings.HasPrefix(id, "summary-") {
				integrated = true
			}
		}
		if !integrated {
			t.Errorf("round %d did not replace the previous summary", round)
		}
		if plan.View[0].ID != "m1" {
			t.Errorf("round %d lost the original task", round)
		}
		view = plan.View
	}
}

func TestDropMiddleOnlyToFit(t *testing.T) {
	b := (&builder{}).user("Fix the bug.")
	for i := 0; i < 8; i++ {
		b.user(fmt.Sprintf("request %d", i)).assistant(strings.Repeat("z", 3600))
	}
	// The summarizer is down, so only dropping whole turns can make it fit.
	req := request(b, 6000, compaction.TierSummarize, compaction.TierDropMiddle)
	req.Summarize = func(compaction.SummaryInput) (string, error) { return "", errors.New("summarizer down") }
	plan := mustPlan(t, req)
	if plan.SummaryFailed == nil || plan.Tiers[len(plan.Tiers)-1] != compaction.TierDropMiddle || plan.TokensAfter > usable(req) {
		t.Fatalf("tiers %v, %d tokens, usable %d", plan.Tiers, plan.TokensAfter, usable(req))
	}
	last := plan.View[len(plan.View)-2:]
	if last[0].Parts[0].Text != "request 7" || plan.View[0].ID != "m1" {
		t.Errorf("the latest turn or the task was dropped: %s", ids(plan.View))
	}
	// Drop-middle stops as soon as it fits: the turns just before the latest
	// survive when there is room.
	if plan.TokensAfter < usable(req)/2 {
		t.Errorf("dropped more than needed: %d tokens left of %d", plan.TokensAfter, usable(req))
	}
	// Without drop_middle allowed the same request cannot fit.
	req.Tiers = []compaction.Tier{compaction.TierSummarize}
	if _, err := compaction.PlanCompaction(req); !errors.Is(err, compaction.ErrTooLarge) {
		t.Errorf("without drop_middle: %v", err)
	}
}

func TestValidate(t *testing.T) {
	b := (&builder{}).user("task").assistant("", "a").result("a", "out").user("latest")
	orig := b.msgs
	for name, tc := range map[string]struct {
		after []chat.Message
		want  string
	}{
		"ok":             {orig, ""},
		"orphan result":  {[]chat.Message{orig[0], orig[2], orig[3]}, "no earlier message"},
		"orphan call":    {[]chat.Message{orig[0], orig[1], orig[3]}, "has no result"},
		"task removed":   {orig[1:], "first message"},
		"latest removed": {orig[:3], "the latest user message"},
	} {
		err := compaction.Validate(orig, tc.after, "m1")
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A user message of no kind is the latest user message to Validate as
	// to the planner, which keeps it (latestUserID): Validate counted only
	// "normal" ones and checked the task in its place.
	unkinded := append([]chat.Message(nil), orig...)
	unkinded[3].Kind = ""
	if err := compaction.Validate(unkinded, unkinded[:3], "m1"); err == nil || !strings.Contains(err.Error(), "the latest user message") {
		t.Errorf("a latest user message of no kind removed: %v", err)
	}
	pending := (&builder{}).user("task").assistant("", "x").msgs
	if err := compaction.ValidatePairs(pending); err != nil {
		t.Errorf("a pending call of the last assistant message is fine: %v", err)
	}
}

// TestSummaryReadsPrunedOriginals: when one plan prunes and then summarizes,
// the summarizer reads the originals of what the prune replaced, not the
// placeholders, so nothing of them is lost to the summary.
func TestSummaryReadsPrunedOriginals(t *testing.T) {
	b := (&builder{}).user("Fix the bug.").steps(12, 3000, "s")
	req := request(b, 8000, compaction.TierPrune, compaction.TierSummarize)
	req.Target = 0.2 // below what pruning alone reaches
	var seen []chat.Message
	inner := req.Summarize
	req.Summarize = func(in compaction.SummaryInput) (string, error) {
		seen = in.Messages
		return inner(in)
	}
	plan := mustPlan(t, req)
	if len(plan.Tiers) != 2 {
		t.Fatalf("tiers %v: want prune and summarize", plan.Tiers)
	}
	if len(seen) == 0 {
		t.Fatal("the summarizer was not called")
	}
	results := 0
	for _, m := range seen {
		if m.Kind != chat.KindNormal {
			t.Fatalf("the summarizer read %s, a %s", m.ID, m.Kind)
		}
		if m.Role == chat.RoleTool {
			results++
			if !strings.Contains(m.Parts[0].ToolResult.Content, strings.Repeat("x", 3000)) {
				t.Fatalf("the summarizer read a cut %s", m.ID)
			}
		}
	}
	if results == 0 {
		t.Fatal("no tool result reached the summarizer")
	}
}
