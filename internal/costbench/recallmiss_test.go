package costbench

import (
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/probes"
)

// TestMissReasons: a probe not in view is counted by where its message
// went: behind a placeholder of the view (masked), behind a summary whose
// trail folds, behind an older summary it names, behind a summary whose
// trail folds nothing, named by id, or lost.
func TestMissReasons(t *testing.T) {
	text := func(id string, kind chat.Kind, s string) chat.Message {
		return chat.Message{ID: id, Kind: kind, Role: chat.RoleUser, Parts: []chat.Part{{Type: chat.PartText, Text: s}}}
	}
	view := []chat.Message{
		text("msg_1", chat.KindNormal, "the task"),
		text("sum_3_1", chat.KindSummary, "[summary]\n## Trail\n- folded: 4 other lines, from messages sum_2_1.\n"),
		text("sum_4_1", chat.KindSummary, "[summary]\n## Trail\n- ran: ls — msg_9\n"),
		text("ph_1", chat.KindPlaceholder, "[output pruned]"),
	}
	named := []string{"sum_2_1"}
	kinds := syntheticKinds(view, named)
	synthetic := []string{"sum_3_1", "sum_4_1", "ph_1", "sum_2_1"}
	expanded := map[string]string{
		"sum_3_1": "\x00id:msg_5\x00pytest -x\n",
		"sum_4_1": "\x00id:msg_9\x00ls\n",
		"ph_1":    "\x00id:msg_12\x00Traceback\n",
		"sum_2_1": "\x00id:msg_2\x00make build\n",
	}
	named2 := func(id string) bool { return id == "msg_20" }
	for _, c := range []struct {
		p    probes.Probe
		want string
	}{
		{probes.Probe{Kind: probes.Command, Origin: "msg_5", Needles: []string{"pytest -x"}}, missFolded},
		{probes.Probe{Kind: probes.Command, Origin: "msg_9", Needles: []string{"ls -la"}}, missUntrailed},
		{probes.Probe{Kind: probes.Error, Origin: "msg_12", Needles: []string{"Traceback"}}, missMasked},
		{probes.Probe{Kind: probes.Command, Origin: "msg_2", Needles: []string{"make build"}}, missOlder},
		// An older occurrence behind a summary: found by its needles.
		{probes.Probe{Kind: probes.Command, Origin: "msg_30", Needles: []string{"make build"}}, missOlder},
		{probes.Probe{Kind: probes.User, Origin: "msg_20", Needles: []string{"please"}}, missNamed},
		{probes.Probe{Kind: probes.User, Origin: "msg_21", Needles: []string{"gone"}}, missLost},
	} {
		if got := missReason(c.p, synthetic, kinds, expanded, named2); got != c.want {
			t.Errorf("%s of %s: %q, want %q", c.p.Kind, c.p.Origin, got, c.want)
		}
	}
	var r RecallResult
	r.Window, r.Strategy = 8192, "extractive summary"
	r.addMiss(probes.Command, missFolded, 2)
	var o RecallResult
	o.addMiss(probes.Command, missFolded, 3)
	r.merge(o)
	var b strings.Builder
	PrintMisses(&b, []RecallResult{r})
	if n := r.Misses[probes.Command][missFolded]; n != 5 || !strings.Contains(b.String(), "| 8k     | extractive summary | command |") {
		t.Errorf("%d commands folded, want 5 (merged), in the table:\n%s", n, b.String())
	}
}

// TestMissesByTranscript: each replay's misses are kept under its
// transcript's name, merged across windows' replays of it, and printed
// most commands not in view first.
func TestMissesByTranscript(t *testing.T) {
	one := func(name string, seen, inView int) RecallResult {
		var r RecallResult
		r.kind(probes.Command).add(Recall{Seen: seen, InView: inView})
		r.class(probes.ClassOf(probes.Command)).add(Recall{Seen: seen, InView: inView})
		r.byFile(name)
		return r
	}
	r := RecallResult{Window: 8192, Strategy: "extractive summary"}
	r.merge(one("a.jsonl", 10, 9))
	r.merge(one("b.jsonl", 10, 4))
	r.merge(one("b.jsonl", 10, 10))
	r.merge(one("c.jsonl", 10, 10)) // nothing missed: not listed
	var b strings.Builder
	PrintMissesByFile(&b, []RecallResult{r})
	out := b.String()
	ia, ib := strings.Index(out, "a.jsonl: commands 1 of 10"), strings.Index(out, "b.jsonl: commands 6 of 20")
	if ia < 0 || ib < 0 || ib > ia || strings.Contains(out, "c.jsonl") {
		t.Errorf("want b (6 of 20) before a (1 of 10), and no c:\n%s", out)
	}
}
