package compaction_test

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/contextd/contextd/internal/compaction"
)

// TestOversizedResultCutsAtBoundaries: the head and tail an oversized
// tool result keeps end and start on whole lines (a `cat` of a file), or
// on whole words when the output has no line break near the cut, never
// inside a grapheme (a ZWJ emoji sequence, a combining mark): a tail
// starting mid-line ("345: config…" of line 12345) misleads the model.
// The original stays whole behind the placeholder (Replaced).
func TestOversizedResultCutsAtBoundaries(t *testing.T) {
	var lines strings.Builder
	for i := 0; lines.Len() < 40_000; i++ {
		fmt.Fprintf(&lines, "line %d: config value alpha=%d path=/srv/app/conf.d/%d.yaml\n", i, i*7, i)
	}
	words := strings.Repeat("identifier_alpha beta_gamma_delta ", 1200)
	emoji := strings.Repeat("👩‍💻e\u0301", 4000) // a ZWJ sequence and a combining mark, no spaces
	for name, out := range map[string]string{"lines": lines.String(), "words": words, "graphemes": emoji} {
		t.Run(name, func(t *testing.T) {
			b := (&builder{}).user("Fix the bug.").steps(2, 100, "c").assistant("", "big").result("big", out)
			plan := mustPlan(t, request(b, 8000, compaction.AllTiers...))
			got := plan.View[len(plan.View)-1].Parts[0].ToolResult.Content
			i, j := strings.Index(got, "\n[contextd pruned "), strings.LastIndex(got, "]\n")
			if i < 0 || j < i {
				t.Fatalf("no placeholder: %.200q", got)
			}
			head, tail := got[:i], got[j+2:]
			if !utf8.ValidString(head) || !utf8.ValidString(tail) || !strings.HasPrefix(out, head) || !strings.HasSuffix(out, tail) {
				t.Fatalf("head %q or tail %q is not the output's", head[max(0, len(head)-40):], tail[:min(40, len(tail))])
			}
			rest := out[len(head) : len(out)-len(tail)]
			switch name {
			case "lines":
				if !strings.HasPrefix(rest, "\n") || !strings.HasSuffix(rest, "\n") {
					t.Errorf("cut inside a line: head ends %q, tail starts %q", head[len(head)-30:], tail[:30])
				}
			case "words":
				if !strings.HasPrefix(rest, " ") || !strings.HasSuffix(rest, " ") {
					t.Errorf("cut inside a word: head ends %q, tail starts %q", head[len(head)-30:], tail[:30])
				}
			case "graphemes":
				if !(strings.HasSuffix(head, "\u0301") || strings.HasSuffix(head, "💻")) || !(strings.HasPrefix(tail, "👩") || strings.HasPrefix(tail, "e\u0301")) {
					t.Errorf("cut inside a grapheme: head ends %q, tail starts %q", head[len(head)-12:], tail[:12])
				}
			}
			if n := len(head) + len(tail); n < 900 || n > 1800 {
				t.Errorf("kept %d characters", n)
			}
			var replaced []string
			for _, it := range plan.Items {
				replaced = append(replaced, it.Replaced...)
			}
			if !strings.Contains(strings.Join(replaced, " "), "m7") {
				t.Errorf("the original m7 is not recorded as replaced: %v", replaced)
			}
		})
	}
}

// TestOversizedResultCutBeforeSummary: a newest tool result larger than
// the whole usable window can never go whole, so it keeps its head and
// tail first; the history that fits beside it stays as it is. It was cut
// last, after the summarizer had summarized the conversation and drop-middle
// dropped it for room that could never be enough.
func TestOversizedResultCutBeforeSummary(t *testing.T) {
	b := (&builder{}).user("Fix the bug.").steps(4, 4000, "c").assistant("", "big").result("big", strings.Repeat("line of a big file\n", 10_000))
	req := request(b, 20_000, compaction.AllTiers...)
	plan := mustPlan(t, req)
	if len(plan.Tiers) != 1 || plan.Tiers[0] != compaction.TierPrune {
		t.Errorf("tiers %v, want prune alone (%d → %d tokens)", plan.Tiers, plan.TokensBefore, plan.TokensAfter)
	}
	if got := ids(plan.View[:len(plan.View)-1]); got != ids(b.msgs[:len(b.msgs)-1]) {
		t.Errorf("the history beside the result changed: %s", got)
	}
}

// TestOversizedResultInASmallRoom: when even the head and tail cannot fit
// beside what no tier shrinks (the fixed part: a long system prompt and
// tools at a small window; a long original task), the result leaves the
// short placeholder instead; the head and tail were refused, ErrTooLarge.
func TestOversizedResultInASmallRoom(t *testing.T) {
	for name, task := range map[string]string{"fixed": "Fix the bug.", "task": "Fix the bug. " + strings.Repeat("context ", 650)} {
		t.Run(name, func(t *testing.T) {
			b := (&builder{}).user(task).assistant("", "big").result("big", strings.Repeat("line of a big file\n", 10_000))
			req := request(b, 2000, compaction.AllTiers...)
			if name == "fixed" {
				req.Fixed = 1300
			}
			plan := mustPlan(t, req)
			got := plan.View[len(plan.View)-1].Parts[0].ToolResult.Content
			if !strings.HasPrefix(got, "[contextd pruned this output of bash") {
				t.Errorf("got %.80q", got)
			}
		})
	}
}
