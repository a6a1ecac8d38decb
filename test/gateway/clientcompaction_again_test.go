package gateway_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A client that compacts its history to the same history again (issue 29:
// the real Codex CLI with 40 KB tool outputs through a 16k window, whose
// summary came out the same each time): the compacted history again —
// the messages the first client compaction appended, or fewer of them,
// then the client's own or none — while the session has gone on much
// further since is another client compaction in the same session, not a
// rewind. A rewind that keeps most of the history stays a fork.

// codexSummary is a summary with Codex CLI's preamble.
const codexSummary = "Another language model started to solve this problem and produced a summary of its thinking process. " +
	"Here is the summary: add() and sub() are fixed, mul() is next; the tests in test_calc.py cover all four."

// clientCompactions counts session id's compactions of tier
// client_compaction, and all of them.
func clientCompactions(s *server, id string) (client, all int) {
	var cmps struct {
		Compactions []struct {
			Tiers []string `json:"tiers"`
		} `json:"compactions"`
	}
	s.rpc("ListCompactions", map[string]any{"sessionId": id}, &cmps)
	for _, c := range cmps.Compactions {
		if slices.Contains(c.Tiers, "client_compaction") {
			client++
		}
	}
	return client, len(cmps.Compactions)
}

// TestClientCompactsToTheSameHistoryAgain: a signalled Chat Completions
// client compacts its history to its system prompt, its task and a
// summary, goes on for rounds of multi-KB outputs, and compacts again to
// the very same history, four times: alone (as Codex sends it) or with a
// new prompt after it. Each is recorded in the same session (history
// "compacted", one client_compaction each), what goes upstream is the
// client's history, and the next requests extend the session — also
// through a window so small that contextd compacts the rounds between
// (the view is then not much longer than the compacted history; the log
// is). Without the fix the second compaction was a rewind of the
// session's client history to its restart: a fork ("edited" in
// cx-again~…), and each later one a fork of that fork, until the chain was
// refused (409 after 64).
func TestClientCompactsToTheSameHistoryAgain(t *testing.T) {
	for _, small := range []bool{false, true} {
		t.Run(map[bool]string{false: "gpt-4o", true: "6k window"}[small], func(t *testing.T) {
			var env map[string]string
			c := &historyClient{t: t, sig: map[string]string{"X-Contextd-Session": "cx-again"}}
			if small {
				models := filepath.Join(t.TempDir(), "models.json")
				if err := os.WriteFile(models, []byte(`{"models": [{"name": "small", "provider": "openai", "context_window": 6000, "max_output_tokens": 500, "encoding": "o200k_base", "exact": true}]}`), 0o600); err != nil {
					t.Fatal(err)
				}
				env, c.model = map[string]string{"CONTEXTD_MODELS_FILE": models}, "small"
			}
			s := start(t, env)
			c.s = s
			c.msgs = append(c.msgs, map[string]any{"role": "system", "content": "You are a coding agent."})
			c.user("Fix the failing tests in calc.py.")
			c.rounds(0, 6, "cx-again")
			compacted := slices.Clone(c.msgs[:2])
			compacted = append(compacted, map[string]any{"role": "user", "content": codexSummary})
			round := 6
			for n := range 4 {
				c.msgs = slices.Clone(compacted)
				if n%2 == 1 {
					c.user("Go on with mul().")
				}
				sent := len(c.msgs)
				id, history, _ := c.send()
				if id != "cx-again" || history != "compacted" {
					t.Fatalf("compaction %d: history %q in %q, want compacted in cx-again", n, history, id)
				}
				checkUpstreamCount(t, s, sent)
				c.rounds(round, 4, "cx-again")
				round += 4
			}
			client, all := clientCompactions(s, "cx-again")
			if client != 4 {
				t.Errorf("cx-again: %d client compactions recorded, want 4", client)
			}
			if small && all == client {
				t.Errorf("cx-again: %d compactions, all the client's: the 6k window is meant to make contextd compact too", all)
			}
			checkClientCompaction(t, s, "cx-again", bigResult(8))
			s.checkUpstream()
		})
	}
}

// TestRewindAfterClientCompactionIsStillAFork: the other side. After a
// client compaction, a rewind that keeps most of the history since (the
// compacted history and most rounds after it, then a new prompt), or one
// back to the compacted history while the session has gone on only a
// little since (not much shorter than the log), is a fork as before.
func TestRewindAfterClientCompactionIsStillAFork(t *testing.T) {
	for _, keepMost := range []bool{true, false} {
		t.Run(map[bool]string{true: "keeps most", false: "little since"}[keepMost], func(t *testing.T) {
			s := start(t, nil)
			c := &historyClient{t: t, s: s, sig: map[string]string{"X-Contextd-Session": "cx-rw"}}
			c.msgs = append(c.msgs, map[string]any{"role": "system", "content": "You are a coding agent."})
			c.user("Fix the failing tests in calc.py.")
			c.rounds(0, 6, "cx-rw")
			c.msgs = append(slices.Clone(c.msgs[:2]), map[string]any{"role": "user", "content": codexSummary})
			if id, history, _ := c.send(); id != "cx-rw" || history != "compacted" {
				t.Fatalf("compaction: history %q in %q, want compacted in cx-rw", history, id)
			}
			if keepMost {
				c.rounds(6, 6, "cx-rw")
				c.msgs = c.msgs[:len(c.msgs)-4] // the last two rounds dropped
			} else {
				c.user("Which test fails?")
				if id, history, _ := c.send(); id != "cx-rw" || history != "extended" {
					t.Fatalf("history %q in %q, want extended in cx-rw", history, id)
				}
				c.msgs = c.msgs[:3] // back to the compacted history
			}
			c.user("Forget that: start with sub().")
			id, history, _ := c.send()
			if id == "cx-rw" || history == "compacted" || history == "extended" {
				t.Fatalf("history %q in %q: want a fork of cx-rw", history, id)
			}
			s.checkUpstream()
		})
	}
}

// TestSameHistoryForkedAgainIsNeverRefused: a signalled client that
// rewinds to the same history and goes on from it more often than the
// fork chain's bound (64) is never refused: each time a session of its
// own, and the conversation goes on in it. Without the fix the 65th was
// 409, and so was every retry of it.
func TestSameHistoryForkedAgainIsNeverRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("66 forks")
	}
	s := start(t, nil)
	c := &historyClient{t: t, s: s, sig: map[string]string{"X-Contextd-Session": "cx-fork"}}
	c.user("Fix the failing tests in calc.py.")
	c.user("Round 0: " + strings.Repeat("ok ", 50))
	c.send()
	c.user("Round 1: " + strings.Repeat("ok ", 50))
	c.send()
	opening := slices.Clone(c.msgs[:1])
	seen := map[string]bool{"cx-fork": true}
	for i := range 66 {
		c.msgs = append(slices.Clone(opening), map[string]any{"role": "user", "content": "Start again with sub()."})
		id, history, _ := c.send() // fails the test on any answer but 200
		if seen[id] || history == "extended" || history == "compacted" {
			t.Fatalf("rewind %d: history %q in %s, want a session no earlier rewind went on in", i, history, id)
		}
		t.Logf("rewind %d: %s in %s", i, history, id)
		seen[id] = true
		c.user(fmt.Sprintf("Rewind %d goes on.", i))
		if got, history, _ := c.send(); got != id || history != "extended" {
			t.Fatalf("rewind %d goes on: history %q in %q, want extended in %s", i, history, got, id)
		}
	}
}

// TestSameSummaryAroundNewPrompts: Codex CLI's second turn compacts to
// the message it kept before, its initial context again, the prompt typed
// since and the same summary: not the compacted history's prefix, and a
// summary the log already holds, but only among the messages the first
// compaction appended — another client compaction in the same session.
// Without the fix: a fork ("forked" in cx-turns~…).
func TestSameSummaryAroundNewPrompts(t *testing.T) {
	s := start(t, nil)
	c := &historyClient{t: t, s: s, sig: map[string]string{"X-Contextd-Session": "cx-turns"}}
	c.msgs = append(c.msgs, map[string]any{"role": "system", "content": "You are a coding agent."})
	env := map[string]any{"role": "user", "content": "<environment_context>\n  <cwd>/work</cwd>\n</environment_context>"}
	task := map[string]any{"role": "user", "content": "Fix the failing tests in calc.py."}
	summary := map[string]any{"role": "user", "content": codexSummary}
	c.msgs = append(c.msgs, env, task)
	c.rounds(0, 6, "cx-turns")
	c.msgs = []map[string]any{c.msgs[0], env, task, summary}
	if id, history, _ := c.send(); id != "cx-turns" || history != "compacted" {
		t.Fatalf("first compaction: history %q in %q, want compacted in cx-turns", history, id)
	}
	typed := "Now recheck the notes with the words amber falcon."
	c.user(typed)
	if id, history, _ := c.send(); id != "cx-turns" || history != "extended" {
		t.Fatalf("the second turn: history %q in %q, want extended in cx-turns", history, id)
	}
	c.rounds(6, 6, "cx-turns")
	c.msgs = []map[string]any{c.msgs[0], task, env, {"role": "user", "content": typed}, summary}
	id, history, _ := c.send()
	if id != "cx-turns" || history != "compacted" {
		t.Fatalf("second compaction: history %q in %q, want compacted in cx-turns", history, id)
	}
	c.rounds(12, 2, "cx-turns")
	if n, _ := clientCompactions(s, "cx-turns"); n != 2 {
		t.Errorf("cx-turns: %d client compactions, want 2", n)
	}
	s.checkUpstream()
}
