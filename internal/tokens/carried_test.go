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

// TestCarriedEstimateBounded: a carried piece's estimate ("n", what
// contextd cannot read: an encrypted compaction item's share of its
// length) counts at most the bytes the message's metadata holds, all
// pieces together — a token stands for at least a byte of what is sent —
// so an estimate of 2^63-1 (an API client may set contextd.carried) does
// not wrap the count negative, and a negative one counts nothing.
func TestCarriedEstimateBounded(t *testing.T) {
	enc, err := tokens.LoadEncoding("o200k_base")
	if err != nil {
		t.Fatal(err)
	}
	fr := tokens.DefaultFraming
	bare := chat.Message{Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText, Text: "done"}}}
	base := tokens.CountMessage(enc, fr, &bare).Tokens
	for _, tc := range []struct {
		carried  string
		min, max int64 // beyond base and the items' framing
	}{
		{`[{"i":true,"n":12}]`, 12, 12},
		{`[{"i":true,"n":-5}]`, 0, 0},
		{`[{"i":true,"n":9223372036854775807}]`, 1, 0},
		{`[{"i":true,"n":9223372036854775807},{"i":true,"n":9223372036854775807}]`, 1, 0},
	} {
		m := bare
		m.Metadata = map[string]string{chat.MetaCarried: tc.carried}
		bytes := int64(len(chat.MetaCarried) + len(tc.carried))
		hi := tc.max
		if hi == 0 && tc.min > 0 {
			hi = bytes
		}
		items := int64(fr.PerMessage) * int64(len(m.Carried()))
		for name, got := range map[string]int64{
			"CountMessage": tokens.CountMessage(enc, fr, &m).Tokens,
			"CountRequest": tokens.CountRequest(enc, fr, "", nil, []chat.Message{m}).PerMsg[0].Tokens,
		} {
			if extra := got - base - items; extra < tc.min || extra > hi {
				t.Errorf("%s: %s counts %d beyond the message; want %d to %d", tc.carried, name, extra, tc.min, hi)
			}
		}
	}
}
