package compaction_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
)

// reminder is a Claude Code <system-reminder> text part of about n bytes.
func reminder(n int, what string) chat.Part {
	body := strings.Repeat(what+" line\n", n/(len(what)+6))
	return chat.Part{Type: chat.PartText, Text: "<system-reminder>\nResult of calling the Read tool:\n" + body + "</system-reminder>"}
}

// afterCompact builds what Claude Code sends after /compact: a task, a
// reply, then one user message of the files it read (system reminders of
// 16, 12, 14 and 4 KB) around a short typed prompt.
func afterCompact(typed string, extra ...chat.Part) *builder {
	b := &builder{}
	b.user("Fix the failing tests in src/app.py.")
	b.assistant("Done: the tests pass.")
	parts := []chat.Part{reminder(16000, "alpha"), reminder(12000, "beta"), reminder(14000, "gamma"), reminder(4000, "delta")}
	parts = append(parts, extra...)
	parts = append(parts, chat.Part{Type: chat.PartText, Text: typed})
	b.add(chat.Message{Role: chat.RoleUser, Parts: parts})
	return b
}

// The latest user message made mostly of a client's scaffolding (issue
// 29/31): it was kept whole, so a request whose prompt is short could not
// fit and was refused. Its scaffolding parts, largest first and only as many
// as needed, now give way to notes naming the message's id; what was typed
// stays verbatim.
func TestScaffoldingOfLatestUserMessageGivesWay(t *testing.T) {
	typed := "Now recheck the notes with the words amber falcon."
	b := afterCompact(typed)
	req := request(b, 8000, compaction.AllTiers...)
	latest := b.msgs[2]
	if latest.Tokens+req.Fixed <= usable(req) {
		t.Fatalf("fixture: the latest message (%d tokens) fits %d usable", latest.Tokens, usable(req))
	}
	plan := mustPlan(t, req)
	if plan.TokensAfter > usable(req) {
		t.Fatalf("%d tokens after, %d usable", plan.TokensAfter, usable(req))
	}
	last := plan.View[len(plan.View)-1]
	if last.Kind != chat.KindPlaceholder || last.Metadata[compaction.ScaffoldOfKey] != latest.ID {
		t.Fatalf("the latest message is %s (%s), not a stand-in for %s", last.ID, last.Kind, latest.ID)
	}
	if got := last.Parts[len(last.Parts)-1]; got.Text != typed {
		t.Fatalf("typed text changed: %q", got.Text)
	}
	// Largest first, only as many as needed: 16 KB and 14 KB go, 12 KB and 4 KB stay.
	for k, pruned := range []bool{true, false, true, false} {
		same := reflect.DeepEqual(last.Parts[k], latest.Parts[k])
		if same == pruned {
			t.Errorf("part %d: pruned %v, want %v", k, !same, pruned)
		}
		if pruned && !strings.Contains(last.Parts[k].Text, "ExpandMessage with message id "+latest.ID) {
			t.Errorf("part %d's note does not name %s: %q", k, latest.ID, last.Parts[k].Text)
		}
	}
	item := plan.Items[len(plan.Items)-1]
	if item.Tier != compaction.TierPrune || len(item.Replaced) != 1 || item.Replaced[0] != latest.ID {
		t.Fatalf("item %+v", item)
	}
	if !reflect.DeepEqual(b.msgs[2], latest) {
		t.Fatal("the plan changed its input")
	}
}

// A request that fits with the latest message whole keeps it whole.
func TestScaffoldingKeptWhenTheRequestFits(t *testing.T) {
	b := afterCompact("Now recheck.")
	plan := mustPlan(t, request(b, 40000, compaction.AllTiers...))
	if !reflect.DeepEqual(plan.View[len(plan.View)-1], b.msgs[2]) {
		t.Fatal("the latest message changed though the request fits")
	}
}

// What is not all scaffolding (a part with typed text around a reminder),
// standing instructions and a pinned message never give way: the request
// is refused as before.
func TestScaffoldingPrunesNothingTyped(t *testing.T) {
	mixed := reminder(30000, "typed")
	mixed.Text = "Look at this log:\n" + mixed.Text
	claudeMd := chat.Part{Type: chat.PartText, Text: "<system-reminder>\nContents of /repo/CLAUDE.md (project instructions):\n" +
		strings.Repeat("Always run the tests.\n", 1500) + "</system-reminder>"}
	for name, b := range map[string]*builder{
		"mixed":    afterCompact("And this.", mixed),
		"claudeMd": afterCompact("And this.", claudeMd),
	} {
		req := request(b, 8000, compaction.AllTiers...)
		if _, err := compaction.PlanCompaction(req); !errors.Is(err, compaction.ErrTooLarge) {
			t.Errorf("%s: %v, want ErrTooLarge", name, err)
		}
	}
	b := afterCompact("Now recheck.")
	b.msgs[2].Pinned = true
	if _, err := compaction.PlanCompaction(request(b, 8000, compaction.AllTiers...)); !errors.Is(err, compaction.ErrTooLarge) {
		t.Errorf("pinned: %v, want ErrTooLarge", err)
	}
}

// Validate accepts a stand-in whose only change is scaffolding, and no other.
func TestValidateScaffoldStandIn(t *testing.T) {
	b := afterCompact("Now recheck.")
	before := b.msgs
	standIn := func(k int, text string) []chat.Message {
		after := append([]chat.Message(nil), before...)
		s := before[2]
		s.ID, s.Kind = "ph-1", chat.KindPlaceholder
		s.Metadata = map[string]string{compaction.ScaffoldOfKey: before[2].ID}
		s.Parts = append([]chat.Part(nil), s.Parts...)
		s.Parts[k] = chat.Part{Type: chat.PartText, Text: text}
		after[2] = s
		return after
	}
	if err := compaction.Validate(before, standIn(0, "[note]"), "m1"); err != nil {
		t.Fatal(err)
	}
	if err := compaction.Validate(before, standIn(4, "[note]"), "m1"); err == nil {
		t.Fatal("a stand-in that changed the typed text passed")
	}
	after := standIn(0, "[note]")
	after[2].Metadata["interrupted"] = "true"
	if err := compaction.Validate(before, after, "m1"); err == nil {
		t.Fatal("a stand-in that changed the message's metadata passed")
	}
}

// secondRound gives the ids req makes a prefix of their own, apart from
// the first round's.
func secondRound(req *compaction.Request) {
	newID := req.NewID
	req.NewID = func(k chat.Kind) string { return "r2-" + newID(k) }
}

// laterRound plans b at 8000 tokens (a stand-in for its last message),
// then a second round at 16000 with summarize only: the steps that
// answered it, a newer prompt, and a keep_human_tokens the stand-in fits.
func laterRound(t *testing.T, b *builder) (chat.Message, *compaction.Plan) {
	t.Helper()
	first := mustPlan(t, request(b, 8000, compaction.AllTiers...))
	standIn := first.View[len(first.View)-1]
	if standIn.Metadata[compaction.ScaffoldOfKey] == "" {
		t.Fatalf("fixture: no stand-in: %s", ids(first.View))
	}
	next := &builder{next: 100}
	next.steps(6, 3000, "s").user("Thanks; now update the changelog.")
	b2 := &builder{msgs: append(append([]chat.Message(nil), first.View...), next.msgs...)}
	req := request(b2, 16000, compaction.TierSummarize)
	secondRound(&req)
	req.Policy.KeepHumanTokens = standIn.Tokens + 200
	plan := mustPlan(t, req)
	if !plan.Changed() || plan.Tiers[0] != compaction.TierSummarize {
		t.Fatalf("fixture: want a summary, tiers %v", plan.Tiers)
	}
	return standIn, plan
}

// Once a newer user message follows, the stand-in is what the person said
// with the scaffolding set aside (issue 31): within keep_human_tokens a
// later round keeps it verbatim, its typed prompt with it, as any other
// human message, rather than summarize it as a placeholder of contextd's.
func TestStandInKeptAsWhatThePersonSaid(t *testing.T) {
	typed := "Now recheck the notes with the words amber falcon."
	standIn, plan := laterRound(t, afterCompact(typed))
	for _, m := range plan.View {
		if m.ID == standIn.ID {
			if !reflect.DeepEqual(m, standIn) {
				t.Fatal("the stand-in was changed")
			}
			return
		}
	}
	t.Fatalf("the stand-in %s (typed %q) was summarized: view %s", standIn.ID, typed, ids(plan.View))
}

// A stand-in of a message with nothing typed (all scaffolding) is not what
// the person said: it stays a placeholder a later round may summarize.
func TestStandInOfNothingTypedNotKept(t *testing.T) {
	b := &builder{}
	b.user("Fix the failing tests in src/app.py.")
	b.assistant("Done: the tests pass.")
	b.add(chat.Message{Role: chat.RoleUser, Parts: []chat.Part{reminder(16000, "alpha"), reminder(12000, "beta"), reminder(14000, "gamma")}})
	standIn, plan := laterRound(t, b)
	for _, m := range plan.View {
		if m.ID == standIn.ID {
			t.Fatalf("a stand-in of nothing typed was kept as the person's: view %s", ids(plan.View))
		}
	}
}

// Scaffolding may be pruned, what the person typed may not (issue 31): when
// pruning the latest message's scaffolding lets the request fit with the
// person's older messages kept verbatim, they are not summarized away as in
// the pass that gives up keeping them.
func TestScaffoldGivesWayBeforeWhatThePersonSaid(t *testing.T) {
	b := &builder{}
	b.user("Fix the failing tests in src/app.py.")
	b.user("Also: never touch the vendor directory.")
	b.steps(4, 2000, "a")
	b.add(chat.Message{Role: chat.RoleUser, Parts: []chat.Part{reminder(16000, "alpha"), reminder(12000, "beta"),
		reminder(14000, "gamma"), {Type: chat.PartText, Text: "Now recheck."}}})
	plan := mustPlan(t, request(b, 8000, compaction.AllTiers...))
	if last := plan.View[len(plan.View)-1]; last.Metadata[compaction.ScaffoldOfKey] != b.msgs[len(b.msgs)-1].ID {
		t.Fatalf("fixture: the latest message has no stand-in: %s", ids(plan.View))
	}
	for _, m := range plan.View {
		if m.ID == "m2" {
			return
		}
	}
	t.Fatalf("the person's m2 was not kept verbatim: view %s, tiers %v", ids(plan.View), plan.Tiers)
}

// The scaffolding pass costs no summarizer call of its own: it runs after
// the tiers of the pass that keeps what the person said, so a request
// whose only excess is scaffolding is summarized once, and one that also
// gives up keeping the person's older messages twice, as before.
func TestScaffoldPassCostsNoSummarizerCall(t *testing.T) {
	b := &builder{}
	b.user("Fix the failing tests in src/app.py.")
	b.user("Also: never touch the vendor directory. " + strings.Repeat("It holds third-party code. ", 1400))
	b.steps(4, 2000, "a")
	b.add(chat.Message{Role: chat.RoleUser, Parts: []chat.Part{reminder(16000, "alpha"), reminder(12000, "beta"),
		reminder(14000, "gamma"), {Type: chat.PartText, Text: "Now recheck."}}})
	for _, c := range []struct {
		name  string
		human int64 // keep_human_tokens
		calls int
	}{{"person's older message past the budget", 3000, 1}, {"person's older message past the window", 1 << 20, 2}} {
		req := request(b, 8000, compaction.AllTiers...)
		req.Policy.KeepHumanTokens = c.human
		calls := 0
		summarize := req.Summarize
		req.Summarize = func(in compaction.SummaryInput) (string, error) { calls++; return summarize(in) }
		plan := mustPlan(t, req)
		if last := plan.View[len(plan.View)-1]; last.Metadata[compaction.ScaffoldOfKey] == "" {
			t.Fatalf("%s: fixture: no stand-in: %s", c.name, ids(plan.View))
		}
		if calls != c.calls {
			t.Errorf("%s: %d summarizer calls, want %d", c.name, calls, c.calls)
		}
	}
}

// While no newer user message follows (the agent's steps answering it),
// the stand-in is the latest user message: no tier touches it, whatever
// keep_human_tokens says, as the message itself was kept.
func TestStandInStaysTheLatestUserMessage(t *testing.T) {
	typed := "Now recheck the notes with the words amber falcon."
	first := mustPlan(t, request(afterCompact(typed), 8000, compaction.AllTiers...))
	standIn := first.View[len(first.View)-1]
	if standIn.Metadata[compaction.ScaffoldOfKey] == "" {
		t.Fatalf("fixture: no stand-in: %s", ids(first.View))
	}
	steps := &builder{next: 100}
	steps.steps(3, 2000, "s")
	b := &builder{msgs: append(append([]chat.Message(nil), first.View...), steps.msgs...)}
	req := request(b, 8000, compaction.AllTiers...)
	secondRound(&req)
	req.Policy.KeepHumanTokens = 0
	plan := mustPlan(t, req)
	if err := compaction.Validate(b.msgs, plan.View, "m1"); err != nil {
		t.Fatal(err)
	}
	for _, m := range plan.View {
		if m.ID == standIn.ID {
			return
		}
	}
	t.Fatalf("the latest user message's stand-in %s was compacted: view %s, tiers %v", standIn.ID, ids(plan.View), plan.Tiers)
}

// A stand-in still past the window gives way in turn: the blocks it kept
// become notes too, in a stand-in of the stand-in that keeps its notes and
// the typed prompt verbatim, and that Validate accepts.
func TestStandInGivesWayInTurn(t *testing.T) {
	typed := "Now recheck the notes with the words amber falcon."
	first := mustPlan(t, request(afterCompact(typed), 8000, compaction.AllTiers...))
	standIn := first.View[len(first.View)-1]
	steps := &builder{next: 100}
	steps.steps(1, 200, "s")
	b := &builder{msgs: append(append([]chat.Message(nil), first.View...), steps.msgs...)}
	req := request(b, 8000, compaction.AllTiers...)
	req.Policy.ReservedOutputTokens = 8000 - 3000
	secondRound(&req)
	if standIn.Tokens <= usable(req) {
		t.Fatalf("fixture: the stand-in (%d tokens) fits %d usable", standIn.Tokens, usable(req))
	}
	plan := mustPlan(t, req)
	if err := compaction.Validate(b.msgs, plan.View, "m1"); err != nil {
		t.Fatal(err)
	}
	var again *chat.Message
	for i := range plan.View {
		if plan.View[i].Metadata[compaction.ScaffoldOfKey] == standIn.ID {
			again = &plan.View[i]
		}
	}
	if again == nil {
		t.Fatalf("no stand-in of %s: view %s", standIn.ID, ids(plan.View))
	}
	if got := again.Parts[len(again.Parts)-1].Text; got != typed {
		t.Fatalf("typed text changed: %q", got)
	}
	if again.Metadata[compaction.ScaffoldNotesKey] == standIn.Metadata[compaction.ScaffoldNotesKey] ||
		!strings.HasPrefix(again.Metadata[compaction.ScaffoldNotesKey], "0,") {
		t.Fatalf("notes %q, before %q", again.Metadata[compaction.ScaffoldNotesKey], standIn.Metadata[compaction.ScaffoldNotesKey])
	}
}
