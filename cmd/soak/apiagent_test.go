package main

import (
	"testing"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// TestSameAsOriginal: an original a revert restores or an expansion
// returns is held to the log's copy; a summary of an earlier round is
// never in the log (it holds what was appended) and is held to the copy
// the agent saw in a view. The 30-minute soak reported "RevertCompaction
// (cmp_2) restored sum_1_1 unlike the log's original" for every chained
// compaction it reverted or expanded: it compared sum_1_1 with the log's
// copy, which does not exist.
func TestSameAsOriginal(t *testing.T) {
	msg := func(id string, kind contextdv1.MessageKind, text string) *contextdv1.Message {
		m := textMessage(contextdv1.Role_ROLE_USER, text)
		m.Id, m.Kind = id, kind
		return m
	}
	normal, summary := contextdv1.MessageKind_MESSAGE_KIND_NORMAL, contextdv1.MessageKind_MESSAGE_KIND_SUMMARY
	log := map[string]*contextdv1.Message{"msg_1": msg("msg_1", normal, "«a1» hello")}
	seen := map[string]*contextdv1.Message{"sum_1_1": msg("sum_1_1", summary, "the summary")}
	cases := []struct {
		name string
		m    *contextdv1.Message
		want bool
	}{
		{"a log message as logged", msg("msg_1", normal, "«a1» hello"), true},
		{"a log message changed", msg("msg_1", normal, "«a1» hellO"), false},
		{"a normal message missing from the log", msg("msg_2", normal, "«a2» lost"), false},
		{"an earlier summary as the agent saw it", msg("sum_1_1", summary, "the summary"), true},
		{"an earlier summary changed", msg("sum_1_1", summary, "another summary"), false},
		{"a summary the agent never saw", msg("sum_2_1", summary, "unseen"), true},
	}
	for _, c := range cases {
		if got := sameAsOriginal(c.m, log, seen); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}
