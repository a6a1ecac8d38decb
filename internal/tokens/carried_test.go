package tokens_test

import (
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/tokens"
)

// TestCarriedCounted: what a message carries beyond its parts
// (chat.MetaCarried) counts its text, plus a message's framing for an item
// of its own, in CountMessage and CountRequest alike; a placeholder that
// kept its original's metadata, and a value that is not the metadata's
// shape, count none of it.
func TestCarriedCounted(t *testing.T) {
	enc, err := tokens.LoadEncoding("o200k_base")
	if err != nil {
		t.Fatal(err)
	}
	fr := tokens.DefaultFraming
	bare := chat.Message{Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: "c1", Name: "ls", Arguments: `{"path":"src"}`}}}}
	with := func(kind chat.Kind, carried string) chat.Message {
		m := bare
		m.Kind, m.Metadata = kind, map[string]string{chat.MetaCarried: carried}
		return m
	}
	base := tokens.CountMessage(enc, fr, &bare).Tokens
	item, block := "Round 1: ls next.", "I should list src first."
	for _, tc := range []struct {
		name string
		m    chat.Message
		want int64
	}{
		{"item and block", with(chat.KindNormal, `[{"t":"Round 1: ls next.","i":true},{"t":"I should list src first."}]`),
			base + int64(fr.PerMessage+enc.Count(item)+enc.Count(block))},
		{"placeholder", with(chat.KindPlaceholder, `[{"t":"Round 1: ls next.","i":true}]`), base},
		{"not its shape", with(chat.KindNormal, `"Round 1: ls next."`), base},
	} {
		if got := tokens.CountMessage(enc, fr, &tc.m).Tokens; got != tc.want {
			t.Errorf("%s: CountMessage %d, want %d", tc.name, got, tc.want)
		}
		rc := tokens.CountRequest(enc, fr, "", nil, []chat.Message{tc.m})
		if got := rc.PerMsg[0].Tokens; got != tc.want {
			t.Errorf("%s: CountRequest's count of the message %d, want %d", tc.name, got, tc.want)
		}
	}
}
