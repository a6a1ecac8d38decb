package gateway_test

import (
	"slices"
	"testing"
)

// An edit after a client compaction (issue 29, the gateway's leftovers):
// once the session's client history restarted at a client compaction, a
// request that edits a message of the compacted history (its first
// message, or the prompt that came with it) or rewinds to the history
// before the restart is what it is anywhere else — a fork of the
// session — and the session's view is left as it was, not emptied by
// another client compaction.

// TestEditAfterClientCompactionIsAFork: a signalled client compacts its
// history to its task, Codex's summary and a prompt, goes on for rounds,
// then (each in a server of its own) edits that prompt, edits its task,
// or rewinds to its first round before the compaction and goes on. Each is
// a fork (a session of its own), the compacted session records one client
// compaction, and its next request still extends it. Without the fix each
// was recorded as another client compaction in the same session
// (compactsAgain: any request repeating part of the compacted history; the
// summary rule: the compaction's own summary anywhere in the request).
func TestEditAfterClientCompactionIsAFork(t *testing.T) {
	for _, how := range []string{"the prompt edited", "the task edited", "rewound before the restart"} {
		t.Run(how, func(t *testing.T) {
			s := start(t, nil)
			c := &historyClient{t: t, s: s, sig: map[string]string{"X-Contextd-Session": "cx-edit"}}
			c.msgs = append(c.msgs, map[string]any{"role": "system", "content": "You are a coding agent."})
			c.user("Fix the failing tests in calc.py.")
			c.rounds(0, 6, "cx-edit")
			before := slices.Clone(c.msgs)
			c.msgs = append(slices.Clone(c.msgs[:2]), map[string]any{"role": "user", "content": codexSummary})
			c.user("Go on with mul().")
			if id, history, _ := c.send(); id != "cx-edit" || history != "compacted" {
				t.Fatalf("compaction: history %q in %q, want compacted in cx-edit", history, id)
			}
			c.rounds(6, 4, "cx-edit")
			main := slices.Clone(c.msgs)
			switch how {
			case "the prompt edited":
				c.msgs = slices.Clone(c.msgs[:3])
				c.user("Go on with div() first.")
			case "the task edited":
				c.msgs = slices.Clone(c.msgs[:4])
				c.msgs[1] = map[string]any{"role": "user", "content": "Fix the failing tests in calc.py and util.py."}
			case "rewound before the restart":
				c.msgs = slices.Clone(before[:4]) // the task, round 0 and its reply
				c.user("Forget that output: start with sub().")
			}
			id, history, _ := c.send()
			if id == "cx-edit" || history == "compacted" || history == "extended" {
				t.Fatalf("history %q in %q: want a fork of cx-edit", history, id)
			}
			if n, _ := clientCompactions(s, "cx-edit"); n != 1 {
				t.Errorf("cx-edit: %d client compactions, want 1 (the fork empties nothing)", n)
			}
			c.msgs = main
			c.rounds(10, 1, "cx-edit")
			s.checkUpstream()
		})
	}
}
