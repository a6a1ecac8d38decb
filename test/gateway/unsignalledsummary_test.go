package gateway_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
	"github.com/contextd/contextd/internal/pgtest"
)

// A compacted history without a signal that keeps no call is found by the
// digest of the summary it starts with, which the store recorded when the
// session's summary request was answered (gateway/unsignalledsummary.go):
// on any replica, and after a restart.

// askOn sends the summary request to s (an aside: the answer is the
// summary, after an <analysis> block the client drops).
func (c *compressingClient) askOn(s *server, summary string) {
	c.t.Helper()
	c.s = s
	ask := append(slices.Clone(c.msgs), map[string]any{"role": "user", "content": qwenDirective})
	if h := c.send(ask, gatewaytest.Reply{Text: "<analysis>read it all</analysis>\n<state_snapshot>" + summary + "</state_snapshot>"}); h != "aside" {
		c.t.Fatalf("%s: the summary request: history %q, want aside", c.tag, h)
	}
}

// resumeOn sends to s the compacted history before the person's next
// prompt, as Qwen Code does: the summary, its resume trailer, the
// acknowledgement, the prompt.
func (c *compressingClient) resumeOn(s *server, summary, prompt string) string {
	c.t.Helper()
	c.s = s
	c.msgs = []any{c.msgs[0],
		map[string]any{"role": "user", "content": "<state_snapshot>" + summary + "</state_snapshot>\n\n" + qwenTrailer},
		map[string]any{"role": "assistant", "content": "Got it. Thanks for the additional context!"},
		map[string]any{"role": "user", "content": prompt},
	}
	h := c.send(c.msgs, gatewaytest.Reply{Text: "On it."})
	c.msgs = append(c.msgs, map[string]any{"role": "assistant", "content": "On it."})
	return h
}

// TestUnsignalledCompactionBeforeAPromptAcrossReplicas: the rounds and the
// summary request on one replica, the compacted history (keeping no call)
// on another over the same PostgreSQL database: it is recorded in the
// session. Before, the answer was remembered by the replica that relayed
// it only, and the other made the compacted history a new session.
func TestUnsignalledCompactionBeforeAPromptAcrossReplicas(t *testing.T) {
	url := pgtest.URL(t)
	a := start(t, map[string]string{"CONTEXTD_DATABASE_URL": url})
	b := start(t, map[string]string{"CONTEXTD_DATABASE_URL": url})
	c := newCompressingClient(t, a, "P")
	c.rounds(6)
	c.finish()
	// A summary of several paragraphs: it ends at the blank line before
	// the trailer, not at its first.
	summary := "\n<overall_goal>Fix calc.py.</overall_goal>\n\n<key_knowledge>add() subtracted; the tests of calc.py read every file.</key_knowledge>\n\n<current_plan>Add a test for subtract().</current_plan>\n"
	c.askOn(a, summary)
	if h := c.resumeOn(b, summary, "Now add a test for subtract()."); h != "compacted" {
		t.Fatalf("the compacted history on the other replica: history %q, want compacted", h)
	}
	c.s = a
	if h := c.send(append(slices.Clone(c.msgs), map[string]any{"role": "user", "content": "And the docs."}), gatewaytest.Reply{Text: "Done."}); h != "extended" {
		t.Errorf("the next request: history %q, want extended", h)
	}
	logs := a.sessionLogs()
	if len(logs) != 1 {
		t.Fatalf("%d sessions, want 1", len(logs))
	}
	for id := range logs {
		checkClientCompaction(t, a, id, "Fix the failing tests in this repository.")
	}
}

// TestUnsignalledCompactionBeforeAPromptAfterRestart: on SQLite, the
// summary request answered, contextd restarted, then the compacted
// history (keeping no call): recorded in the session. Two conversations
// whose summaries came out the same before the restart are no one's after
// it. Before, the answer was remembered in the process's memory only: a
// new session.
func TestUnsignalledCompactionBeforeAPromptAfterRestart(t *testing.T) {
	env := map[string]string{"CONTEXTD_DATA_DIR": t.TempDir()}
	var c, x *compressingClient
	summary := "<overall_goal>Fix calc.py.</overall_goal> Every file was read; add() subtracts no more."
	same := "The work so far: every file was read and every check passes; nothing is left to do here."
	t.Run("before", func(t *testing.T) {
		s := start(t, env)
		c = newCompressingClient(t, s, "S")
		c.rounds(4)
		c.finish()
		c.askOn(s, summary)
		x, _ = summaryTwins(t, s, same)
	})
	if t.Failed() {
		return
	}
	s := start(t, env)
	c.t, x.t = t, t
	if h := c.resumeOn(s, summary, "Now add a test for subtract()."); h != "compacted" {
		t.Errorf("the compacted history after the restart: history %q, want compacted", h)
	}
	if h := x.resumeOn(s, same, "Now the docs."); h == "compacted" || h == "extended" {
		t.Errorf("a summary two sessions got: history %q, want a session of its own", h)
	}
	if n := len(s.sessionLogs()); n != 4 {
		t.Errorf("%d sessions, want 4 (S, X, Y, and X's compacted history on its own)", n)
	}
	for id, log := range s.sessionLogs() {
		if all := strings.Join(log, "\n"); strings.Contains(all, "Fix calc.py") && strings.Contains(all, "Fix the parser.") {
			t.Errorf("session %s holds two conversations:\n%s", id, all)
		}
	}
}

// TestUnsignalledCompactionBeforeAPromptDeletedTwin: two conversations
// whose summaries came out the same, one of whose sessions was deleted
// since (its archive not yet purged): the summary is still no one's, and
// the deleted session's client going on does not land in the other's
// session. A deleted session's summary of its own is found, and is no
// session to join: the conversation goes on in a session of its own. Before, the lookup read live sessions only: the summary was
// the other's, and the deleted session's conversation was recorded as its
// client compaction.
func TestUnsignalledCompactionBeforeAPromptDeletedTwin(t *testing.T) {
	s := start(t, nil)
	same := "The work so far: every file was read and every check passes; nothing is left to do here."
	_, y := summaryTwins(t, s, same)
	// And a conversation of its own summary, its session deleted too.
	c := newCompressingClient(t, s, "S")
	c.rounds(3)
	c.finish()
	own := "<overall_goal>Fix calc.py.</overall_goal> Every file was read; add() subtracts no more."
	c.askOn(s, own)
	for id, log := range s.sessionLogs() {
		if all := strings.Join(log, "\n"); strings.Contains(all, "Fix the lexer.") || strings.Contains(all, "call_S_0") {
			s.rpc("DeleteSession", map[string]any{"sessionId": id}, nil)
		}
	}
	if h := c.resumeOn(s, own, "Now add a test for subtract()."); h == "compacted" || h == "extended" {
		t.Errorf("a deleted session's conversation alone: history %q, want a session of its own", h)
	}
	if h := y.resumeOn(s, same, "Now the docs."); h == "compacted" || h == "extended" {
		t.Errorf("the deleted session's conversation: history %q, want a session of its own", h)
	}
	for id, log := range s.sessionLogs() {
		if all := strings.Join(log, "\n"); strings.Contains(all, "Fix the parser.") && strings.Contains(all, "Now the docs.") {
			t.Errorf("session %s holds two conversations:\n%s", id, all)
		}
	}
}

// summaryTwins runs two conversations on s (X fixing the parser, Y the
// lexer) whose summary requests are both answered with summary.
func summaryTwins(t *testing.T, s *server, summary string) (x, y *compressingClient) {
	t.Helper()
	x, y = newCompressingClient(t, s, "X"), newCompressingClient(t, s, "Y")
	x.msgs[1] = map[string]any{"role": "user", "content": "Fix the parser."}
	y.msgs[1] = map[string]any{"role": "user", "content": "Fix the lexer."}
	for _, z := range []*compressingClient{x, y} {
		z.rounds(3)
		z.finish()
		z.askOn(s, summary)
	}
	return x, y
}
