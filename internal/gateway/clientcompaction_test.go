package gateway

import (
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
		name string
		req  []chat.Message
		want bool
	}{
		{"kept subset, not a prefix", []chat.Message{log[0], log[5], user("Summary: a, b done."), user("Go on.")}, true},
		{"Codex's summary, the task kept", []chat.Message{log[0], summary, user("Go on.")}, true},
		{"Codex's summary alone", []chat.Message{summary}, true},
		{"a summary and files read again (Claude Code), few messages", []chat.Message{summary, log[12], user("Read: " + big + big + big + big + big)}, true},
		{"a compaction item", []chat.Message{log[0], item, user("Go on.")}, true},
		{"a rewind", []chat.Message{log[0], log[1], user("Start over with sub().")}, false},
		{"an edit of the last prompt", []chat.Message{log[0], log[1], log[2], user("b, again" + big[:200])}, false},
		{"a reordered subset", []chat.Message{log[0], log[5], log[3], user("Go on.")}, false},
		{"as long as the view", append([]chat.Message{log[0]}, append(log[3:13:13], summary)...), false},
		{"extends the log", append(log[:len(log):len(log)], user("Next.")), false},
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
		m := &logMatch{s: store.Session{ActiveTokens: view, ActiveCount: int64(len(log))}, log: ids, k: k, extends: k == len(ids)}
		if got := clientCompacts(m, c); got != tc.want {
			t.Errorf("%s: clientCompacts %v, want %v", tc.name, got, tc.want)
		}
	}
}
