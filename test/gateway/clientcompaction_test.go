package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/pgtest"
)

// Client compactions (issue 29 items 3 and 5): a client that compacts its
// own history — a summary and the messages it kept instead of the history
// — stays in its session (the signal's), recorded there as a compaction of
// tier client_compaction; a rewind or an edit is still a fork.

// checkClientCompaction checks that session id recorded a client
// compaction and that its log still holds the original whose text
// contains original, expandable.
func checkClientCompaction(t *testing.T, s *server, id, original string) {
	t.Helper()
	tiers := s.compactionTiers(id)
	if !slices.ContainsFunc(tiers, func(ts []string) bool { return slices.Contains(ts, "client_compaction") }) {
		t.Errorf("session %s: compactions of tiers %q, want a client_compaction", id, tiers)
	}
	var page struct {
		Messages []editedMessage `json:"messages"`
	}
	s.rpc("GetMessages", map[string]any{"sessionId": id, "view": "MESSAGE_VIEW_LOG", "pageSize": 1000}, &page)
	for _, m := range page.Messages {
		for _, p := range m.Parts {
			if p.Text == nil || !strings.Contains(p.Text.Text, original) {
				continue
			}
			var x struct {
				Message editedMessage `json:"message"`
			}
			s.rpc("ExpandMessage", map[string]any{"sessionId": id, "messageId": m.ID}, &x)
			if len(x.Message.Parts) == 0 || x.Message.Parts[0].Text == nil || !strings.Contains(x.Message.Parts[0].Text.Text, original) {
				t.Errorf("ExpandMessage(%s): %+v, want the original", m.ID, x.Message)
			}
			return
		}
	}
	t.Errorf("session %s: the log no longer holds the original %.40q", id, original)
}

// historyClient is a Chat Completions client that keeps its history.
type historyClient struct {
	t     *testing.T
	s     *server
	sig   map[string]string
	msgs  []map[string]any
	model string // gpt-4o when empty
}

func (c *historyClient) user(text string) {
	c.msgs = append(c.msgs, map[string]any{"role": "user", "content": text})
}

// send posts the history and keeps the reply; it returns the response's
// session, history and used percentage.
func (c *historyClient) send() (id, history string, used float64) {
	c.t.Helper()
	model := c.model
	if model == "" {
		model = "gpt-4o"
	}
	resp, out := c.s.post("/v1/chat/completions", map[string]any{"model": model, "messages": c.msgs}, c.sig)
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("%d %s", resp.StatusCode, out)
	}
	var r struct {
		Choices []struct {
			Message map[string]any `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(out, &r); err != nil || len(r.Choices) == 0 {
		c.t.Fatalf("reply %s: %v", out, err)
	}
	c.msgs = append(c.msgs, map[string]any{"role": "assistant", "content": r.Choices[0].Message["content"]})
	used, _ = strconv.ParseFloat(resp.Header.Get("X-Contextd-Used-Percent"), 64)
	return resp.Header.Get("X-Contextd-Session"), resp.Header.Get("X-Contextd-History"), used
}

// rounds adds n rounds of multi-KB outputs, each extending session want.
func (c *historyClient) rounds(from, n int, want string) float64 {
	c.t.Helper()
	var used float64
	for i := from; i < from+n; i++ {
		c.user(fmt.Sprintf("Round %d, the output:\n%s", i, bigResult(i)))
		id, history, u := c.send()
		if id != want || history != "extended" && !(i == 0 && history == "new") {
			c.t.Fatalf("round %d: history %q in %q, want extended in %q", i, history, id, want)
		}
		used = u
	}
	return used
}

// TestClientCompactsItsHistory: a Chat Completions client with a signal
// replaces its history by what it keeps and a summary, twice: first
// keeping its task and its latest output (a subset of the log, not a
// prefix) with a summary of its own words, later by Codex's summary alone.
// Each time: the same session (history "compacted"), the used percentage
// drops to what the client sends, the originals stay in the log
// (expandable), what goes upstream is the client's history, and the next
// requests extend the session. Without the fix each compaction was a
// fork: a new session (cx-chat~…) holding a copy.
func TestClientCompactsItsHistory(t *testing.T) {
	s := start(t, nil)
	c := &historyClient{t: t, s: s, sig: map[string]string{"X-Contextd-Session": "cx-chat"}}
	c.msgs = append(c.msgs, map[string]any{"role": "system", "content": "You are a coding agent."})
	task := "Fix the failing tests in calc.py."
	c.user(task)
	before := c.rounds(0, 6, "cx-chat")
	kept := c.msgs[len(c.msgs)-2] // the latest output
	c.msgs = []map[string]any{c.msgs[0], c.msgs[1], kept}
	c.user("Summary of the work so far: add() and sub() are fixed, mul() is next.")
	c.user("Go on with mul().")
	sent := len(c.msgs)
	id, history, after := c.send()
	if id != "cx-chat" || history != "compacted" {
		t.Fatalf("first compaction: history %q in %q, want compacted in cx-chat", history, id)
	}
	if after >= before/2 {
		t.Errorf("used %.1f %% after the compaction, %.1f %% before: want it to drop", after, before)
	}
	checkUpstreamCount(t, s, sent)
	checkClientCompaction(t, s, "cx-chat", bigResult(2))
	// Exact: the session counts what a session of the compacted history
	// from the start counts, token for token.
	resp, out := s.post("/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": c.msgs[:sent]}, map[string]string{"X-Contextd-Session": "control"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("control: %d %s", resp.StatusCode, out)
	}
	s.waitRecorded("cx-chat", "control") // both replies, or it raced their recordings
	if a, b := s.usedTokens("cx-chat"), s.usedTokens("control"); a != b {
		t.Errorf("the compacted session counts %d tokens, a session of the compacted history from the start %d", a, b)
	}
	before = c.rounds(6, 5, "cx-chat")
	// The second compaction: Codex's summary, nothing kept.
	c.msgs = c.msgs[:1]
	c.user("Another language model started to solve this problem and produced a summary of its thinking process. Here is the summary: mul() and div() are fixed.")
	c.user("Now run the whole suite.")
	id, history, after = c.send()
	if id != "cx-chat" || history != "compacted" {
		t.Fatalf("second compaction: history %q in %q, want compacted in cx-chat", history, id)
	}
	if after >= before/2 {
		t.Errorf("used %.1f %% after the second compaction, %.1f %% before: want it to drop", after, before)
	}
	c.rounds(11, 2, "cx-chat")
	checkClientCompaction(t, s, "cx-chat", bigResult(8))
	s.checkUpstream()
}

// checkUpstreamCount checks that the latest upstream request held the
// client's n messages.
func checkUpstreamCount(t *testing.T, s *server, n int) {
	t.Helper()
	reqs := s.fake.Requests()
	var got struct {
		Messages []json.RawMessage `json:"messages"`
	}
	_ = json.Unmarshal(reqs[len(reqs)-1].Raw, &got)
	if len(got.Messages) != n {
		t.Errorf("upstream: %d messages, the client sent %d", len(got.Messages), n)
	}
}

// TestClientRewindIsStillAFork: the other side of the rule. A signalled
// client that drops its last messages and goes on (a rewind: a prefix of
// the log and new messages), or edits its last prompt, is much shorter
// than its session too, but keeps no summary and no subset of the log
// other than a prefix: a session of its own, as before.
func TestClientRewindIsStillAFork(t *testing.T) {
	for _, edit := range []bool{false, true} {
		t.Run(map[bool]string{false: "rewind", true: "edit"}[edit], func(t *testing.T) {
			s := start(t, nil)
			c := &historyClient{t: t, s: s, sig: map[string]string{"X-Contextd-Session": "cx-rewind"}}
			c.user("Fix the failing tests in calc.py.")
			c.rounds(0, 6, "cx-rewind")
			if edit {
				c.msgs = c.msgs[:3] // the task, its first output, and the reply
				c.user("Round 1, the output (again):\n" + bigResult(1))
			} else {
				c.msgs = c.msgs[:2]
				c.user("Forget that output: start with sub().")
			}
			id, history, _ := c.send()
			if id == "cx-rewind" || history == "compacted" || history == "extended" {
				t.Fatalf("history %q in %q: want a fork of cx-rewind", history, id)
			}
			s.checkUpstream()
		})
	}
}

// TestUnsignalledCompactionForks: without a signal the conversation is
// found by its history only, and a compacted history is another one: a
// new session (docs/gateway.md, Known limits).
func TestUnsignalledCompactionForks(t *testing.T) {
	s := start(t, nil)
	c := &historyClient{t: t, s: s}
	c.user("Fix the failing tests in calc.py.")
	c.user("Round 0, the output:\n" + bigResult(0))
	first, _, _ := c.send()
	for i := 1; i < 5; i++ {
		c.user(fmt.Sprintf("Round %d, the output:\n%s", i, bigResult(i)))
		c.send()
	}
	c.msgs = c.msgs[:1]
	c.user("Another language model started to solve this problem and produced a summary of its thinking process. Here is the summary: add() is fixed.")
	id, history, _ := c.send()
	if id == first || history == "compacted" {
		t.Fatalf("history %q in %q: an unsignalled compaction is a session of its own", history, id)
	}
}

// TestClientCompactionAcrossReplicas: the compacted request reaches two
// replicas on one PostgreSQL database at once (a client's retry racing
// it): both answer in the signal's session, the compaction is recorded
// once (the version check: the second replica matches again and finds the
// compacted history stored, recorded in the same transaction as its
// record), and the compacted history is in the log once.
//
// The race is made: the test holds the session's row, so both requests,
// matched as the same compaction, wait for it in PrepareContext's
// transaction.
func TestClientCompactionAcrossReplicas(t *testing.T) {
	url := pgtest.URL(t)
	a := start(t, map[string]string{"CONTEXTD_DATABASE_URL": url})
	b := start(t, map[string]string{"CONTEXTD_DATABASE_URL": url})
	c := &historyClient{t: t, s: a, sig: map[string]string{"X-Contextd-Session": "cx-replicas"}}
	c.user("Fix the failing tests in calc.py.")
	c.rounds(0, 6, "cx-replicas")
	logLen := len(a.logOf("cx-replicas"))
	c.msgs = c.msgs[:1]
	summary := "Another language model started to solve this problem and produced a summary of its thinking process. Here is the summary: add() is fixed."
	c.user(summary)
	body := map[string]any{"model": "gpt-4o", "messages": c.msgs}
	waiting, release := holdSession(t, url, "cx-replicas")
	var wg sync.WaitGroup
	for _, s := range []*server{a, b} {
		wg.Go(func() {
			resp, raw, err := s.send("/v1/chat/completions", body, c.sig)
			if err != nil {
				t.Error(err)
			} else if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Contextd-Session") != "cx-replicas" {
				t.Errorf("%d in %q (%s): %s", resp.StatusCode, resp.Header.Get("X-Contextd-Session"), resp.Header.Get("X-Contextd-History"), raw)
			}
		})
	}
	deadline := time.Now().Add(20 * time.Second)
	for waiting() < 2 {
		if time.Now().After(deadline) {
			release()
			wg.Wait()
			t.Fatal("the two requests did not wait for the session's row")
		}
		time.Sleep(10 * time.Millisecond)
	}
	release()
	wg.Wait()
	if tiers := a.compactionTiers("cx-replicas"); len(tiers) != 1 || !slices.Equal(tiers[0], []string{"client_compaction"}) {
		t.Errorf("compactions of tiers %q, want one client compaction", tiers)
	}
	a.waitLogLen("cx-replicas", logLen+2)
	log := a.logOf("cx-replicas")
	n := 0
	for _, l := range log {
		if strings.Contains(l, "Here is the summary: add() is fixed.") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the summary is in the log %d times, want once: %q", n, log[logLen:])
	}
	a.checkUpstream()
	b.checkUpstream()
}

// TestSummaryRequestIsAnAside: a signalled client asks for the summary it
// will compact with, as Claude Code's /compact does: its history without
// its final reply, and the compaction prompt. It is answered in the
// signal's session (history "aside"), nothing stored, the upstream
// request the session's view without that reply and with the prompt, no
// used percentage; the compacted history that follows is a client
// compaction in the same session. Without the fix the summary request
// was a fork (edited; from=cc-compact), a session of its own.
func TestSummaryRequestIsAnAside(t *testing.T) {
	s := start(t, nil)
	c := &historyClient{t: t, s: s, sig: map[string]string{"X-Contextd-Session": "cc-compact"}}
	c.user("Fix the failing tests in calc.py.")
	c.rounds(0, 6, "cc-compact")
	logLen := len(c.msgs) // the task, and six outputs and replies
	s.waitLogLen("cc-compact", logLen)
	c.msgs = c.msgs[:len(c.msgs)-1] // without the final reply
	c.user("Your task is to create a detailed summary of the conversation so far, paying close attention to the user's explicit requests.")
	sent := len(c.msgs)
	resp, out := s.post("/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": c.msgs}, c.sig)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	if h, id := resp.Header.Get("X-Contextd-History"), resp.Header.Get("X-Contextd-Session"); h != "aside" || id != "cc-compact" {
		t.Fatalf("the summary request: history %q in %q, want aside in cc-compact", h, id)
	}
	if u := resp.Header.Get("X-Contextd-Used-Percent"); u != "" {
		t.Errorf("an aside says %s %% used: it is not the session's view", u)
	}
	checkUpstreamCount(t, s, sent)
	if got := len(s.logOf("cc-compact")); got != logLen {
		t.Errorf("the log has %d messages after the aside, had %d: nothing is stored", got, logLen)
	}
	c.msgs = []map[string]any{{"role": "user", "content": "This session is being continued from a previous conversation that ran out of context. Summary: tests 1 to 6 pass."}}
	c.user("Now the docs.")
	if id, history, _ := c.send(); id != "cc-compact" || history != "compacted" {
		t.Errorf("the compacted history: %q in %q, want compacted in cc-compact", history, id)
	}
	s.checkUpstream()
}

// TestFailedClientCompactionChangesNothing: a client compaction whose
// request fails after the record (its compacted history is over the
// model's window: PrepareContext refuses it) changes nothing: the answer
// is an error, no client compaction is recorded (the record goes with the
// append, in PrepareContext's transaction), the session's view and log are
// what they were, and the client's next compaction, one that fits, is
// recorded in the same session. Without the fix the gateway fed the long
// compacted history in pieces (replayLong): the summary was appended,
// restart-marked, before the last piece failed, so the view held the old
// history and the summary, and the next compaction extended it (history
// "extended", the old history counted again).
func TestFailedClientCompactionChangesNothing(t *testing.T) {
	s := start(t, nil)
	c := &historyClient{t: t, s: s, sig: map[string]string{"X-Contextd-Session": "cx-fail"}}
	c.user("Fix the failing tests in calc.py.")
	c.rounds(0, 6, "cx-fail")
	logLen := len(c.msgs)
	s.waitLogLen("cx-fail", logLen)
	used := s.usedTokens("cx-fail")
	summary := "Another language model started to solve this problem and produced a summary of its thinking process. Here is the summary: add() is fixed."
	huge := strings.Repeat("a line of a file far too large for any window, read whole\n", 12_000) // 700 KB: over gpt-4o's 128k tokens
	body := map[string]any{"model": "gpt-4o", "messages": []map[string]any{
		{"role": "user", "content": summary}, {"role": "user", "content": huge}}}
	resp, out := s.post("/v1/chat/completions", body, c.sig)
	if resp.StatusCode == http.StatusOK {
		t.Fatalf("an over-window compacted history answered %d (%s): want an error", resp.StatusCode, resp.Header.Get("X-Contextd-History"))
	}
	for _, tiers := range s.compactionTiers("cx-fail") {
		if slices.Contains(tiers, "client_compaction") {
			t.Errorf("the failed request recorded a client compaction (%s)", out)
		}
	}
	if got := s.usedTokens("cx-fail"); got != used {
		t.Errorf("the session counts %d tokens after the failed compaction, %d before", got, used)
	}
	if got := len(s.logOf("cx-fail")); got != logLen {
		t.Errorf("the log has %d messages after the failed compaction, %d before: %.80q", got, logLen, s.logOf("cx-fail")[logLen:])
	}
	c.msgs = []map[string]any{{"role": "user", "content": summary}}
	c.user("Go on with sub().")
	if id, history, _ := c.send(); id != "cx-fail" || history != "compacted" {
		t.Errorf("the compaction that fits: %q in %q, want compacted in cx-fail", history, id)
	}
	s.checkUpstream()
}

// TestSummaryRequestLeavesTheSessionAlone: a summary request whose system
// prompt and model are not the session's (a client may ask for its
// summary with a prompt of its own) is still an aside, and changes
// nothing but the ledger: the session's system prompt, model, log and
// used tokens are what they were, its version moved once (the aside's
// call in the ledger, which the version names), and the upstream request
// carries the request's system prompt. The test waits for each call's
// ledger entry (recorded just after the reply is relayed) before it
// reads the session, or it raced the aside's record.
// Without the fix the aside followed the request (as an extension does):
// the session's system prompt and model became the summary request's,
// its version moved, and the client's next request moved them back.
func TestSummaryRequestLeavesTheSessionAlone(t *testing.T) {
	s := start(t, nil)
	c := &historyClient{t: t, s: s, sig: map[string]string{"X-Contextd-Session": "cc-alone"}}
	c.msgs = append(c.msgs, map[string]any{"role": "system", "content": "You are a coding agent."})
	c.user("Fix the failing tests in calc.py.")
	c.rounds(0, 6, "cc-alone")
	s.waitLogLen("cc-alone", len(c.msgs)-1)
	type session struct {
		Session struct {
			Model        string `json:"model"`
			SystemPrompt string `json:"systemPrompt"`
			Version      string `json:"version"`
			LogCount     string `json:"logCount"`
			Usage        struct {
				Used string `json:"usedTokens"`
			} `json:"usage"`
		} `json:"session"`
	}
	var before, after session
	s.checkLedger("cc-alone")
	s.rpc("GetSession", map[string]any{"sessionId": "cc-alone"}, &before)
	msgs := append([]map[string]any{{"role": "system", "content": "You summarize conversations."}}, c.msgs[1:len(c.msgs)-1]...)
	msgs = append(msgs, map[string]any{"role": "user", "content": "Your task is to create a detailed summary of the conversation so far."})
	resp, out := s.post("/v1/chat/completions", map[string]any{"model": "gpt-4o-mini", "messages": msgs}, c.sig)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	if h, id := resp.Header.Get("X-Contextd-History"), resp.Header.Get("X-Contextd-Session"); h != "aside" || id != "cc-alone" {
		t.Fatalf("the summary request: history %q in %q, want aside in cc-alone", h, id)
	}
	s.checkLedger("cc-alone") // the aside's call is billed to the session
	s.rpc("GetSession", map[string]any{"sessionId": "cc-alone"}, &after)
	v0, _ := strconv.ParseInt(before.Session.Version, 10, 64)
	v1, _ := strconv.ParseInt(after.Session.Version, 10, 64)
	want := before.Session
	want.Version = strconv.FormatInt(v0+1, 10)
	if after.Session != want || v1 != v0+1 {
		t.Errorf("the session after the aside: %+v, before: %+v; want it unchanged but for the ledger's version", after.Session, before.Session)
	}
	reqs := s.fake.Requests()
	if raw := string(reqs[len(reqs)-1].Raw); !strings.Contains(raw, "You summarize conversations.") || strings.Contains(raw, "You are a coding agent.") {
		t.Errorf("upstream: %.300s; want the summary request's system prompt", raw)
	}
	s.checkUpstream()
}
