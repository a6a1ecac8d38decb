package gateway

import (
	"testing"

	"github.com/contextd/contextd/internal/chat"
)

// TestClientFormJoins: the client's form of a prefilled turn is the
// prefill and the continuation as they are, or joined by whitespace of
// the client's (a space where the continuation has none, a newline), or
// the continuation alone; never a text with anything else in it.
func TestClientFormJoins(t *testing.T) {
	text := func(role chat.Role, parts ...string) chat.Message {
		m := chat.Message{Role: role}
		for _, p := range parts {
			m.Parts = append(m.Parts, chat.Part{Type: chat.PartText, Text: p})
		}
		return m
	}
	for _, tc := range []struct {
		cont, kept string
		parts      []string // the kept turn in parts, when set
		want       bool
	}{
		{" the answer", "Here is the answer", nil, true},
		{"the answer", "Here is the answer", nil, true},
		{" the answer", "Here is\n the answer", nil, true},
		{"the answer", "Here is\nthe answer", nil, true},
		{"the answer", "", []string{"Here is", "the answer"}, true},
		{"the answer", "the answer", nil, true},
		{"the answer", "Here isthe answer", nil, true},
		{"the answer", "Here is my answer", nil, false},
		{"the answer", "Here is, the answer", nil, false},
		{"the answer", "Here is the answer, and mine", nil, false},
		{"the answer", "Here is", nil, false},
		{"the answer", "the answer Here is", nil, false},
		{"the answer", "the answer\nHere is", nil, false},
	} {
		v := text(chat.RoleAssistant, tc.kept)
		if tc.parts != nil {
			v = text(chat.RoleAssistant, tc.parts...)
		}
		tail := []chat.Message{text(chat.RoleAssistant, "Here is"), text(chat.RoleAssistant, tc.cont)}
		if got := clientForm(tail, &v); got != tc.want {
			t.Errorf("prefill %q, continuation %q, kept %q %q: clientForm %v, want %v", "Here is", tc.cont, tc.kept, tc.parts, got, tc.want)
		}
	}
	// A reply without a prefill: its text alone, never with the client's
	// own words before or after it, whatever joins them.
	tail := []chat.Message{text(chat.RoleAssistant, "the answer")}
	for kept, want := range map[string]bool{"the answer": true, " the answer\n": true, "the answer\nMy note.": false,
		"My note.\nthe answer": false, "the answer the answer": false} {
		v := text(chat.RoleAssistant, kept)
		if got := clientForm(tail, &v); got != want {
			t.Errorf("reply %q, kept %q: clientForm %v, want %v", "the answer", kept, got, want)
		}
	}
}
