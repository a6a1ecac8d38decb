package gateway_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
	"github.com/contextd/contextd/internal/pgtest"
)

// Client compactions without a session signal (gateway/unsignalled.go):
// Qwen Code's chat compression, talking to contextd, sends nothing that
// names its session. It asks for a summary with its whole history and a
// directive, then goes on from the summary, a canned acknowledgement with
// its latest tool call, and that call's result.

// qwenDirective is Qwen Code's request for the summary
// (COMPRESSION_REQUEST_DIRECTIVE, after its cache-sharing preamble).
const qwenDirective = "Do not call tools; tool execution is disabled for this request. First, reason in your <analysis> block. Then, produce the <state_snapshot> XML."

// qwenTrailer ends Qwen Code's compacted summary (RESUME_TRAILER).
const qwenTrailer = "Resume the prior task using the summary above. Continue from the last in-flight step; do not acknowledge the summary, do not re-introduce, do not greet the user again."

// compressingClient is a Chat Completions client without a signal that
// runs tool rounds and compresses its history as Qwen Code does.
type compressingClient struct {
	t   *testing.T
	s   *server
	tag string // names the provider's calls for this conversation
	// model is the conversation's ("gpt-4o" when empty).
	model string
	next  int // the provider's next call
	msgs  []any
}

func newCompressingClient(t *testing.T, s *server, tag string) *compressingClient {
	return &compressingClient{t: t, s: s, tag: tag, msgs: []any{
		map[string]any{"role": "system", "content": "You are Qwen Code, an interactive CLI agent."},
		map[string]any{"role": "user", "content": "Fix the failing tests in this repository."},
	}}
}

// call is the assistant message of the provider's call id.
func call(text, id string) map[string]any {
	m := map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
		"id": id, "type": "function", "function": map[string]any{"name": "read_file", "arguments": `{"path":"` + id + `.go"}`}}}}
	if text != "" {
		m["content"] = text
	}
	return m
}

func result(id string, i int) map[string]any {
	return map[string]any{"role": "tool", "tool_call_id": id, "content": bigResult(i)}
}

// send posts msgs with the fake scripted to answer reply, and returns the
// response's history.
func (c *compressingClient) send(msgs []any, reply gatewaytest.Reply) string {
	c.t.Helper()
	c.s.fake.Script(reply)
	resp, out := c.s.post("/v1/chat/completions", map[string]any{"model": cmp.Or(c.model, "gpt-4o"), "messages": msgs}, nil)
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("%s: %d %s", c.tag, resp.StatusCode, out)
	}
	return resp.Header.Get("X-Contextd-History")
}

// callID is the provider's i-th call of the conversation.
func (c *compressingClient) callID(i int) string { return fmt.Sprintf("call_%s_%d", c.tag, i) }

// rounds runs n tool rounds: each request carries the result of the
// provider's latest call, and the answer is its next call.
func (c *compressingClient) rounds(n int) {
	c.t.Helper()
	for range n {
		if c.next > 0 {
			c.msgs = append(c.msgs, result(c.callID(c.next-1), c.next-1))
		}
		id := c.callID(c.next)
		if h := c.send(c.msgs, gatewaytest.Reply{ToolCalls: []gatewaytest.ToolCall{{ID: id, Name: "read_file", Arguments: `{"path":"` + id + `.go"}`}}}); h != "extended" && c.next > 0 {
			c.t.Fatalf("%s: round %d: history %q, want extended", c.tag, c.next, h)
		}
		c.msgs = append(c.msgs, call("", id))
		c.next++
	}
}

// compress asks for a summary (the history, the pending result and the
// directive), then sends the compacted history: the summary, the
// acknowledgement with the latest call, its result. It returns the
// histories of both requests.
func (c *compressingClient) compress(summary string) (asked, compacted string) {
	c.t.Helper()
	last := c.callID(c.next - 1)
	ask := append(slices.Clone(c.msgs), result(last, c.next-1), map[string]any{"role": "user", "content": qwenDirective})
	asked = c.send(ask, gatewaytest.Reply{Text: "<analysis>done</analysis><state_snapshot>" + summary + "</state_snapshot>"})
	c.msgs = []any{c.msgs[0],
		map[string]any{"role": "user", "content": "<state_snapshot>" + summary + "</state_snapshot>\n\n" + qwenTrailer},
		call("Got it. Thanks for the additional context!", last),
	}
	c.msgs = append(c.msgs, result(last, c.next-1))
	id := c.callID(c.next)
	compacted = c.send(c.msgs, gatewaytest.Reply{ToolCalls: []gatewaytest.ToolCall{{ID: id, Name: "read_file", Arguments: `{"path":"` + id + `.go"}`}}})
	c.msgs = append(c.msgs, call("", id))
	c.next++
	return asked, compacted
}

// sessionLogs are the logs of the live sessions, by id.
func (s *server) sessionLogs() map[string][]string {
	s.t.Helper()
	var list struct {
		Sessions []struct {
			ID string `json:"id"`
		} `json:"sessions"`
	}
	s.rpc("ListSessions", map[string]any{}, &list)
	out := make(map[string][]string)
	for _, x := range list.Sessions {
		out[x.ID] = s.logOf(x.ID)
	}
	return out
}

// TestUnsignalledCompactionsStayApart: two conversations without a signal
// with the same opening, each 8 tool rounds, compress their histories as
// Qwen Code does, with the same summary, twice, and go on. Each summary
// request is an aside (nothing stored); each compacted history is a client
// compaction in its own conversation's session ("compacted"), found by
// the calls it kept; the next requests extend it. In the end: two
// sessions, each holding only its own calls, each with client
// compactions. Without the rule each summary request was recorded
// ("extended") and each compacted history was a new session ("new"): six
// sessions.
func TestUnsignalledCompactionsStayApart(t *testing.T) {
	bothStores(t, func(t *testing.T, s *server) {
		a, b := newCompressingClient(t, s, "A"), newCompressingClient(t, s, "B")
		for round := range 2 {
			a.rounds(8)
			b.rounds(8)
			for _, c := range []*compressingClient{a, b} {
				asked, compacted := c.compress("The tests fail in calc.py; every file was read.")
				if asked != "aside" || compacted != "compacted" {
					t.Fatalf("%s: compression %d: the summary request %q, the compacted history %q; want aside, compacted", c.tag, round, asked, compacted)
				}
			}
		}
		a.rounds(2)
		b.rounds(2)
		logs := s.sessionLogs()
		if len(logs) != 2 {
			t.Fatalf("%d sessions, want 2 (one per conversation): %v", len(logs), slices.Collect(mapsKeys(logs)))
		}
		for id, log := range logs {
			all := strings.Join(log, "\n")
			own := "call_A_"
			if strings.Contains(all, "call_B_") {
				own = "call_B_"
			}
			if other := map[string]string{"call_A_": "call_B_", "call_B_": "call_A_"}[own]; strings.Contains(all, other) {
				t.Errorf("session %s holds both conversations' calls:\n%s", id, all)
			}
			if strings.Contains(all, "state_snapshot> XML") {
				t.Errorf("session %s holds a summary request (an aside stores nothing)", id)
			}
			checkClientCompaction(t, s, id, "Fix the failing tests in this repository.")
		}
		s.checkUpstream()
	})
}

// TestUnsignalledCompactionOfReusedCallIDs: conversations whose provider
// numbers its calls from 0 in each (call_0, call_1, …, as local models and
// fakes do) share every call id. A compacted history keeps calls that two
// sessions hold: it is no one's, and starts a session of its own rather
// than joining a stranger's.
func TestUnsignalledCompactionOfReusedCallIDs(t *testing.T) {
	s := start(t, nil)
	a, b := newCompressingClient(t, s, "X"), newCompressingClient(t, s, "X")
	b.msgs[1] = map[string]any{"role": "user", "content": "Add a test for the parser."}
	a.rounds(8)
	b.rounds(8)
	if _, compacted := a.compress("Summary of A."); compacted == "compacted" || compacted == "extended" {
		t.Fatalf("a compacted history whose calls two sessions hold: %q, want a session of its own", compacted)
	}
	for id, log := range s.sessionLogs() {
		all := strings.Join(log, "\n")
		if strings.Contains(all, "Summary of A.") && strings.Contains(all, "Add a test for the parser.") {
			t.Errorf("session %s holds both conversations:\n%s", id, all)
		}
	}
}

func mapsKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// finish sends the result of the provider's latest call and keeps its
// final answer: the turn ends with no call in flight.
func (c *compressingClient) finish() {
	c.t.Helper()
	c.msgs = append(c.msgs, result(c.callID(c.next-1), c.next-1))
	if h := c.send(c.msgs, gatewaytest.Reply{Text: "All " + c.tag + " checks pass."}); h != "extended" {
		c.t.Fatalf("%s: the final answer: history %q, want extended", c.tag, h)
	}
	c.msgs = append(c.msgs, map[string]any{"role": "assistant", "content": "All " + c.tag + " checks pass."})
}

// compressBeforePrompt compresses the history before the person's next
// prompt, as Qwen Code does on --resume: the summary request, then the
// summary, the acknowledgement and the prompt (no call kept).
func (c *compressingClient) compressBeforePrompt(summary, prompt string) (asked, compacted string) {
	c.t.Helper()
	ask := append(slices.Clone(c.msgs), map[string]any{"role": "user", "content": qwenDirective})
	asked = c.send(ask, gatewaytest.Reply{Text: "<analysis>read</analysis>\n<state_snapshot>" + summary + "</state_snapshot>"})
	c.msgs = []any{c.msgs[0],
		map[string]any{"role": "user", "content": "<state_snapshot>" + summary + "</state_snapshot>\n\n" + qwenTrailer},
		map[string]any{"role": "assistant", "content": "Got it. Thanks for the additional context!"},
		map[string]any{"role": "user", "content": prompt},
	}
	compacted = c.send(c.msgs, gatewaytest.Reply{Text: "On it."})
	c.msgs = append(c.msgs, map[string]any{"role": "assistant", "content": "On it."})
	return asked, compacted
}

// TestUnsignalledCompactionBeforeAPrompt: a client without a signal
// compresses its history before its next prompt, keeping no call: the
// compacted history starts with the summary the provider wrote in answer
// to its summary request (an aside of its session), and is recorded in
// that session. Two conversations whose summaries come out the same are
// no one's: the second starts a session of its own, never the first's.
// Without the summary memory the compacted history was a new session.
func TestUnsignalledCompactionBeforeAPrompt(t *testing.T) {
	s := start(t, nil)
	a := newCompressingClient(t, s, "A")
	a.rounds(6)
	a.finish()
	summary := "Conversation A: the tests of calc.py were fixed, every file was read, add() subtracts no more."
	if asked, compacted := a.compressBeforePrompt(summary, "Now add a test for subtract()."); asked != "aside" || compacted != "compacted" {
		t.Fatalf("the summary request %q, the compacted history %q; want aside, compacted", asked, compacted)
	}
	if n := len(s.sessionLogs()); n != 1 {
		t.Fatalf("%d sessions, want 1", n)
	}
	// Two conversations, the same summary each: no one's.
	b, c := newCompressingClient(t, s, "B"), newCompressingClient(t, s, "C")
	b.msgs[1] = map[string]any{"role": "user", "content": "Fix the parser."}
	c.msgs[1] = map[string]any{"role": "user", "content": "Fix the lexer."}
	for _, x := range []*compressingClient{b, c} {
		x.rounds(4)
		x.finish()
	}
	same := "The work so far: every file was read and every check passes; nothing is left to do here."
	b.ask(same)
	c.ask(same)
	if _, compacted := b.compressBeforePrompt(same, "Now the docs."); compacted == "compacted" || compacted == "extended" {
		t.Fatalf("a summary two sessions got: history %q, want a session of its own", compacted)
	}
	if n := len(s.sessionLogs()); n != 4 {
		t.Errorf("%d sessions, want 4 (A, B, C, and B's compacted history on its own)", n)
	}
}

// ask sends the summary request alone (the answer is summary).
func (c *compressingClient) ask(summary string) {
	c.t.Helper()
	ask := append(slices.Clone(c.msgs), map[string]any{"role": "user", "content": qwenDirective})
	if h := c.send(ask, gatewaytest.Reply{Text: "<state_snapshot>" + summary + "</state_snapshot>"}); h != "aside" {
		c.t.Fatalf("%s: the summary request: history %q, want aside", c.tag, h)
	}
}

// TestUnsignalledCompactionAcrossReplicas: the rounds go to one replica,
// the summary request and the compacted history to another on the same
// PostgreSQL database, which has never served the conversation: it finds
// the session by the call the history kept (the store's index, not a
// replica's memory) and records the compaction there.
func TestUnsignalledCompactionAcrossReplicas(t *testing.T) {
	url := pgtest.URL(t)
	a := start(t, map[string]string{"CONTEXTD_DATABASE_URL": url})
	b := start(t, map[string]string{"CONTEXTD_DATABASE_URL": url})
	c := newCompressingClient(t, a, "R")
	c.rounds(8)
	// Replica a records its last reply (call_R_7) just after relaying it:
	// b, which cannot wait for a's recording, is asked once it is stored.
	for id := range a.sessionLogs() {
		a.waitLogLen(id, 16)
	}
	c.s = b
	if asked, compacted := c.compress("Replica summary: every file was read."); asked != "aside" || compacted != "compacted" {
		t.Fatalf("on the other replica: the summary request %q, the compacted history %q; want aside, compacted", asked, compacted)
	}
	c.s = a
	c.rounds(1)
	if n := len(a.sessionLogs()); n != 1 {
		t.Errorf("%d sessions, want 1", n)
	}
}

// TestUnsignalledCompactionIsNotReverted: a compacted history without a
// signal that made its kept call again cannot be reverted (the restored
// view would hold the call twice, which providers reject):
// RevertCompaction answers FAILED_PRECONDITION and the view stays the
// compacted history (docs/gateway.md).
func TestUnsignalledCompactionIsNotReverted(t *testing.T) {
	s := start(t, nil)
	c := newCompressingClient(t, s, "V")
	c.rounds(4)
	if asked, compacted := c.compress("Summary of V: every file was read, the tests still fail."); asked != "aside" || compacted != "compacted" {
		t.Fatalf("the summary request %q, the compacted history %q; want aside, compacted", asked, compacted)
	}
	logs := s.sessionLogs()
	if len(logs) != 1 {
		t.Fatalf("%d sessions, want 1", len(logs))
	}
	for id := range logs {
		var cmps struct {
			Compactions []struct {
				ID    string   `json:"id"`
				Tiers []string `json:"tiers"`
			} `json:"compactions"`
		}
		s.rpc("ListCompactions", map[string]any{"sessionId": id}, &cmps)
		if len(cmps.Compactions) != 1 || !slices.Equal(cmps.Compactions[0].Tiers, []string{"client_compaction"}) {
			t.Fatalf("compactions %+v, want one client_compaction", cmps.Compactions)
		}
		// The compacted history's reply (its next call) is recorded.
		s.waitLogLen(id, 12)
		if log := s.logOf(id); len(log) != 12 || !strings.Contains(log[11], c.callID(4)) {
			t.Fatalf("log %q, want 12 messages ending with call %s", log, c.callID(4))
		}
		before := texts(s.messagesOf(id, "MESSAGE_VIEW_ACTIVE"))
		b, _ := json.Marshal(map[string]any{"sessionId": id, "compactionId": cmps.Compactions[0].ID})
		resp, err := http.Post(s.url("/contextd.v1.ContextService/RevertCompaction"), "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "failed_precondition") {
			t.Errorf("RevertCompaction: %d %s, want failed_precondition", resp.StatusCode, body)
		}
		if after := texts(s.messagesOf(id, "MESSAGE_VIEW_ACTIVE")); !slices.Equal(after, before) {
			t.Errorf("the refused revert changed the view: %q, was %q", after, before)
		}
	}
}

// TestUnsignalledEditKeepingCallsForks: a client without a signal that
// changes its first prompt and sends its whole history again (its latest
// calls kept, no summary) edits its history: a fork, a session of its
// own, as before; the session it left keeps its view. Before, the calls it
// kept made it that session's client compaction ("compacted"): the view
// emptied and the whole history appended again.
func TestUnsignalledEditKeepingCallsForks(t *testing.T) {
	s := start(t, nil)
	c := newCompressingClient(t, s, "E")
	c.rounds(8)
	logs := s.sessionLogs()
	if len(logs) != 1 {
		t.Fatalf("%d sessions, want 1", len(logs))
	}
	var id string
	for id = range logs {
	}
	s.waitLogLen(id, 16)
	view := texts(s.messagesOf(id, "MESSAGE_VIEW_ACTIVE"))
	msgs := slices.Clone(c.msgs)
	msgs[1] = map[string]any{"role": "user", "content": "Fix the failing tests in this repository, and the docs."}
	msgs = append(msgs, result(c.callID(c.next-1), c.next-1))
	if h := c.send(msgs, gatewaytest.Reply{Text: "Both fixed."}); h == "compacted" || h == "extended" {
		t.Errorf("an edited first prompt with the calls kept: history %q, want a fork", h)
	}
	if n := len(s.sessionLogs()); n != 2 {
		t.Errorf("%d sessions, want 2 (the edit a fork)", n)
	}
	if after := texts(s.messagesOf(id, "MESSAGE_VIEW_ACTIVE")); !slices.Equal(after, view) {
		t.Errorf("the session the edit left: view %q, was %q", after, view)
	}
}

// TestUnsignalledCompactionOfCopiedCallsSendsItsOwnHistory: within a
// tenant, a request without a signal that carries a session's latest call
// id (a client that copied it) and a summary of its own is that session's
// client compaction (documented: call ids, like a session id, are a
// capability within the tenant). What goes upstream is the request's own
// history: the view is emptied, nothing of the session it joined is sent.
func TestUnsignalledCompactionOfCopiedCallsSendsItsOwnHistory(t *testing.T) {
	s := start(t, nil)
	a := newCompressingClient(t, s, "A")
	a.rounds(4)
	last := a.callID(a.next - 1)
	for id := range s.sessionLogs() {
		s.waitLogLen(id, 8) // the session's last call is recorded
	}
	copied := []any{
		map[string]any{"role": "system", "content": "You are another agent."},
		map[string]any{"role": "user", "content": "<state_snapshot>Stranger's summary: nothing of A.</state_snapshot>\n\n" + qwenTrailer},
		map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"id": last, "type": "function", "function": map[string]any{"name": "read_file", "arguments": `{"path":"stranger.go"}`}}}},
		map[string]any{"role": "tool", "tool_call_id": last, "content": "the stranger's own result"},
	}
	s.fake.Reset()
	h := a.send(copied, gatewaytest.Reply{Text: "Done."})
	reqs := s.fake.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d upstream requests, want 1", len(reqs))
	}
	raw := string(reqs[0].Raw)
	if h != "compacted" {
		t.Errorf("history %q, want compacted (the session whose call it carries)", h)
	}
	for _, own := range []string{"Stranger's summary", "stranger.go", "the stranger's own result", "You are another agent."} {
		if !strings.Contains(raw, own) {
			t.Errorf("the upstream request lacks the request's own %q", own)
		}
	}
	for _, theirs := range []string{"Fix the failing tests in this repository.", a.callID(0), "You are Qwen Code"} {
		if strings.Contains(raw, theirs) {
			t.Errorf("the upstream request holds %q of the session it joined:\n%s", theirs, raw)
		}
	}
}

// TestUnsignalledSummaryPromptIsStoredByTheNextRequest: a person who types
// a summary directive into a client without a signal gets an aside (the
// exchange is not stored then); the conversation's next request extends
// the log by that prompt, its answer and the next prompt, all stored.
func TestUnsignalledSummaryPromptIsStoredByTheNextRequest(t *testing.T) {
	s := start(t, nil)
	c := newCompressingClient(t, s, "P")
	c.rounds(2)
	c.finish()
	prompt := "Please produce the <state_snapshot> XML of what we did."
	c.msgs = append(c.msgs, map[string]any{"role": "user", "content": prompt})
	if h := c.send(c.msgs, gatewaytest.Reply{Text: "<state_snapshot>two files read</state_snapshot>"}); h != "aside" {
		t.Fatalf("the typed directive: history %q, want aside", h)
	}
	c.msgs = append(c.msgs, map[string]any{"role": "assistant", "content": "<state_snapshot>two files read</state_snapshot>"},
		map[string]any{"role": "user", "content": "Thanks, go on."})
	if h := c.send(c.msgs, gatewaytest.Reply{Text: "Going on."}); h != "extended" {
		t.Fatalf("the next prompt: history %q, want extended", h)
	}
	logs := s.sessionLogs()
	if len(logs) != 1 {
		t.Fatalf("%d sessions, want 1", len(logs))
	}
	for id := range logs {
		s.waitLogLen(id, 10)
		all := strings.Join(s.logOf(id), "\n")
		for _, want := range []string{prompt, "two files read", "Thanks, go on.", "Going on."} {
			if !strings.Contains(all, want) {
				t.Errorf("the log lacks %q:\n%s", want, all)
			}
		}
	}
}

// TestUnsignalledSummaryRequestWhileAnotherReplicaRecords: ten
// conversations run their rounds on replica a and ask for their summary
// on replica b at once, while a may still be recording its last reply
// (the call the summary request carries with its result). An aside
// matched on the log before that reply was stored, and sent as the view
// (which by then holds it) and its new messages, went upstream with the
// call twice (the provider's 400, in 7 of 8 runs here before the fix):
// the aside is matched again when the log grew since its match.
func TestUnsignalledSummaryRequestWhileAnotherReplicaRecords(t *testing.T) {
	url := pgtest.URL(t)
	a := start(t, map[string]string{"CONTEXTD_DATABASE_URL": url})
	b := start(t, map[string]string{"CONTEXTD_DATABASE_URL": url})
	for i := range 10 {
		tag := fmt.Sprintf("W%d", i)
		c := newCompressingClient(t, a, tag)
		c.msgs[1] = map[string]any{"role": "user", "content": "Task " + tag}
		c.rounds(8)
		c.s = b
		last := c.callID(c.next - 1)
		ask := append(slices.Clone(c.msgs), result(last, c.next-1), map[string]any{"role": "user", "content": qwenDirective})
		if h := c.send(ask, gatewaytest.Reply{Text: "<state_snapshot>" + tag + " summary</state_snapshot>"}); h != "aside" {
			t.Errorf("%s: the summary request on the other replica: history %q, want aside", tag, h)
		}
	}
	b.checkUpstream()
}

// TestHintedCompactionIsNotLookedUp: a request with a grouping hint
// (`user`) that carries a conversation's compacted history — its summary
// and its latest call, kept — is not that conversation's compaction when
// the conversation had no hint: the lookup by kept calls searches the
// tenant's sessions whatever their signal, and conversations of different
// signals never meet. Without the guard it was recorded as "compacted" in
// the unhinted conversation's session.
func TestHintedCompactionIsNotLookedUp(t *testing.T) {
	s := start(t, nil)
	a := newCompressingClient(t, s, "a")
	a.rounds(4)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if logs := s.sessionLogs(); len(logs) == 1 && len(slices.Collect(maps.Values(logs))[0]) == len(a.msgs)-1 {
			break // the latest call is recorded
		}
	}
	last := a.callID(a.next - 1)
	msgs := []any{a.msgs[0],
		map[string]any{"role": "user", "content": "<state_snapshot>the tests of a pass</state_snapshot>\n\n" + qwenTrailer},
		call("Got it. Thanks for the additional context!", last),
		result(last, a.next-1),
	}
	s.fake.Script(gatewaytest.Reply{Text: "done"})
	resp, out := s.post("/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": msgs, "user": "bob"}, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	if h := resp.Header.Get("X-Contextd-History"); h == "compacted" {
		t.Errorf("a hinted request was recorded as the compaction of an unhinted conversation (session %s)", resp.Header.Get("X-Contextd-Session"))
	}
	s.checkUpstream()
}
