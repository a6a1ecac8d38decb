package gateway

import (
	"crypto/sha256"
	"encoding/binary"
	"runtime"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// TestClientCompactsRule: both sides of the rule (clientcompaction.go).
// Of a log of a task and six rounds of outputs and replies, a request
// much shorter than the session (half its messages, or half its view's
// tokens) that keeps a subset that is not a prefix, or carries a client's
// summary or a compaction item, is a client compaction; a rewind or an
// edit (a prefix and new messages), a reordered subset, a request nearly
// as long as the log, or one that extends the log, is not.
func TestClientCompactsRule(t *testing.T) {
	user := func(text string) chat.Message {
		return chat.Message{Role: chat.RoleUser, Parts: []chat.Part{{Type: chat.PartText, Text: text}}}
	}
	reply := func(text string) chat.Message {
		return chat.Message{Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText, Text: text}}}
	}
	big := strings.Repeat("output line of a tool, several words long\n", 100)
	log := []chat.Message{user("Fix the tests.")}
	for i := range 6 {
		log = append(log, user(string(rune('a'+i))+big), reply("ok "+string(rune('a'+i))))
	}
	var view int64
	for i := range log {
		view += approxTokens(log[i : i+1])
	}
	item := reply("")
	item.Metadata = map[string]string{metaCompactionItem: "1"}
	summary := user("Another language model started to solve this problem and produced a summary of its thinking process: a and b are done.")
	cases := []struct {
		name    string
		req     []chat.Message
		want    bool
		restart int // the log's first messages a client compaction appended
	}{
		{"kept subset, not a prefix", []chat.Message{log[0], log[5], user("Summary: a, b done."), user("Go on.")}, true, 0},
		{"Codex's summary, the task kept", []chat.Message{log[0], summary, user("Go on.")}, true, 0},
		{"Codex's summary alone", []chat.Message{summary}, true, 0},
		{"a summary and files read again (Claude Code), few messages", []chat.Message{summary, log[12], user("Read: " + big + big + big + big + big)}, true, 0},
		{"a compaction item", []chat.Message{log[0], item, user("Go on.")}, true, 0},
		{"a rewind", []chat.Message{log[0], log[1], user("Start over with sub().")}, false, 0},
		{"an edit of the last prompt", []chat.Message{log[0], log[1], log[2], user("b, again" + big[:200])}, false, 0},
		{"a reordered subset", []chat.Message{log[0], log[5], log[3], user("Go on.")}, false, 0},
		{"as long as the view", append([]chat.Message{log[0]}, append(log[3:13:13], summary)...), false, 0},
		{"extends the log", append(log[:len(log):len(log)], user("Next.")), false, 0},
		// A client's side request (a title, a topic) on a prompt the user
		// typed before: one of the log's later messages, without its
		// opening, is no kept subset.
		{"a side request quoting an earlier prompt", []chat.Message{user("Write a title for this conversation."), log[5]}, false, 0},
		{"an earlier prompt alone", []chat.Message{log[5]}, false, 0},
		// The log restarted at a client compaction of its first three
		// messages: that compacted history again, or fewer of it, then
		// the client's own or none, is another (compactsAgain); a rewind
		// past it, or one not much shorter than the log, is not.
		{"the compacted history again", log[0:3:3], true, 3},
		{"the compacted history again, then a prompt", append(log[0:3:3], user("Go on.")), true, 3},
		// Part of the compacted history, then the client's own: an edit
		// of the compacted history (its prompt), as anywhere else.
		{"part of the compacted history, then a prompt", []chat.Message{log[0], user("Go on.")}, false, 3},
		{"a rewind before the restart quoting a later reply", []chat.Message{log[0], user("an output before the restart"), log[4], user("Go on.")}, false, 3},
		{"a rewind past the compacted history", append(log[0:5:5], user("Start over with sub().")), false, 3},
		{"the compacted history again, not much shorter", append(log[0:3:3], user("w"+big), user("x"+big), user("y"+big), user("z"+big)), false, 3},
		{"a rewind, no restart", log[0:3:3], false, 0},

		{"the compacted history again, asking for a summary", append(log[0:3:3], user("Your task is to create a detailed summary of the conversation so far.")), false, 3},
	}
	for _, tc := range cases {
		c := &conversation{msgs: tc.req}
		historyChains("chat", signal{}, c)
		ids := make([][32]byte, len(log))
		for i := range log {
			ids[i] = identityOf(&log[i])
		}
		k := 0
		for k < len(ids) && k < len(c.ids) && ids[k] == c.ids[k] {
			k++
		}
		m := &logMatch{s: store.Session{ActiveTokens: view, ActiveCount: int64(len(log))}, log: ids, k: k, extends: k == len(ids), restart: tc.restart}
		if got := clientCompacts(m, c); got != tc.want {
			t.Errorf("%s: clientCompacts %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestClientCompactsRuleBounded: the rule's memory is bounded by the
// request, not by the log: a three-message request against a session of
// 200,000 logged messages allocates a set of its own identities, not of
// the log's (which cost 10 MB a request, for any signalled request much
// shorter than its session).
func TestClientCompactsRuleBounded(t *testing.T) {
	ids := make([][32]byte, 200_000)
	for i := range ids {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(i))
		ids[i] = sha256.Sum256(b[:])
	}
	c := &conversation{msgs: []chat.Message{
		{Role: chat.RoleUser, Parts: []chat.Part{{Type: chat.PartText, Text: "Fix the tests."}}},
		{Role: chat.RoleUser, Parts: []chat.Part{{Type: chat.PartText, Text: "Summary: a, b done."}}},
		{Role: chat.RoleUser, Parts: []chat.Part{{Type: chat.PartText, Text: "Go on."}}},
	}}
	historyChains("chat", signal{}, c)
	m := &logMatch{s: store.Session{ActiveTokens: 1 << 30, ActiveCount: int64(len(ids))}, log: ids}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const n = 5
	for range n {
		clientCompacts(m, c)
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 64<<10 {
		t.Errorf("clientCompacts allocates %d bytes a request against a log of %d messages: want it bounded by the request's 3", per, len(ids))
	}
}

// TestSameSummaryAgain: a log restarted at a client compaction of an
// opening, a task and a summary, then rounds and a prompt typed since. A
// request with that summary again, its kept messages reordered and the
// prompt typed since kept (Codex CLI's second turn puts its initial
// context after the messages it kept), is another client compaction; the
// same request against a log whose summary came after the compacted
// history (not the compaction's own) is not.
func TestSameSummaryAgain(t *testing.T) {
	user := func(text string) chat.Message {
		return chat.Message{Role: chat.RoleUser, Parts: []chat.Part{{Type: chat.PartText, Text: text}}}
	}
	big := strings.Repeat("output line of a tool, several words long\n", 100)
	opening, task, typed := user("<environment_context>cwd</environment_context>"), user("Fix the tests."), user("Now recheck.")
	summary := user("Another language model started to solve this problem and produced a summary of its thinking process: a and b are done.")
	for _, tc := range []struct {
		name string
		log  []chat.Message
		req  []chat.Message // nil: the task, the opening, the prompt typed since, the summary
		want bool
	}{
		{"the compaction's summary", []chat.Message{opening, task, summary}, nil, true},
		{"a summary after the compaction", []chat.Message{opening, task, user("Go on."), summary}, nil, false},
		// A rewind past the compacted history, which carries its summary.
		{"a rewind past the compacted history", []chat.Message{opening, summary, task}, []chat.Message{opening, summary, task, user("a" + big), user("Start over.")}, false},
		// The compaction's summary where the request still shares it with
		// the log (an edit of the message after it), or after an edit of
		// the compacted history's first message: an edit, a fork.
		{"an edit after the summary", []chat.Message{opening, summary, task}, []chat.Message{opening, summary, user("Fix the tests in util.py.")}, false},
		{"the first message edited, the summary kept", []chat.Message{opening, task, summary}, []chat.Message{user("<environment_context>cwd2</environment_context>"), task, summary}, false},
		{"the compacted history again, fewer of it", []chat.Message{opening, task, summary}, []chat.Message{opening, summary}, true},
		// Codex compacting again at the start of a turn: the messages it
		// kept, the prompt typed now (not in the log), then the same
		// summary; and the same with the compacted history's task edited.
		{"compacted again with a new prompt", []chat.Message{opening, task, summary}, []chat.Message{task, opening, user("Recheck amber."), summary}, true},
		{"the task edited, a new prompt, the summary kept", []chat.Message{opening, task, summary}, []chat.Message{user("Fix the tests in util.py."), opening, user("Recheck amber."), summary}, false},
	} {
		log := tc.log
		for i := range 6 {
			log = append(log, user(string(rune('a'+i))+big))
		}
		log = append(log, typed)
		ids := make([][32]byte, len(log))
		for i := range log {
			ids[i] = identityOf(&log[i])
		}
		c := &conversation{msgs: tc.req}
		if c.msgs == nil {
			c.msgs = []chat.Message{task, opening, typed, summary}
		}
		historyChains("responses", signal{}, c)
		m := &logMatch{s: store.Session{ActiveTokens: approxTokens(log), ActiveCount: int64(len(log))}, log: ids, restart: 3}
		for m.k < len(ids) && m.k < len(c.ids) && ids[m.k] == c.ids[m.k] {
			m.k++
		}
		if got := clientCompacts(m, c); got != tc.want {
			t.Errorf("%s: clientCompacts %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestSameSummaryAgainLinear: a request of 40,000 messages the log holds
// (its first not the log's, none a summary) against a log of 80,000
// restarted at a compaction of 60,000 is no compaction. When each message
// searched the compacted history this took 2.4e9 identity comparisons
// (4.7 s here); clientCompacts now makes one pass over the log. No time is
// asserted (speed is for benchmarks): the test holds the answer on the
// large input, and its run time shows the order of the work.
func TestSameSummaryAgainLinear(t *testing.T) {
	const logLen, restart, reqLen = 80_000, 60_000, 40_000
	ids := make([][32]byte, logLen)
	for i := range ids {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(i))
		ids[i] = sha256.Sum256(b[:])
	}
	c := &conversation{msgs: make([]chat.Message, reqLen), ids: make([][32]byte, reqLen)}
	for i := range c.msgs {
		c.msgs[i] = chat.Message{Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText, Text: "ok"}}}
		c.ids[i] = ids[logLen-reqLen+i]
	}
	c.ids[0] = sha256.Sum256([]byte("another opening"))
	m := &logMatch{s: store.Session{ActiveTokens: 1 << 40, ActiveCount: logLen}, log: ids, restart: restart}
	if clientCompacts(m, c) {
		t.Fatal("clientCompacts: a request without a summary that keeps the log's end is not a compaction")
	}
}
