package gateway

import (
	"encoding/json"
	"maps"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/tokens"
)

// TestCarriedTextCounted: a reasoning item (Responses) or a thinking block
// (Messages) goes upstream with its message, verbatim, and the provider
// counts its text; the message's count (what the engine stores, and what
// the used percentage of a view no report has anchored yet is made of)
// includes it, framed as an item of its own. Before the fix it counted
// nothing: with Codex and Claude Code, the first request after a
// compaction showed up to 1.1 points less than the provider counted, one
// reasoning summary short per kept turn. A placeholder of such a message
// is sent without it, and counts none of it.
func TestCarriedTextCounted(t *testing.T) {
	enc, err := tokens.LoadEncoding("o200k_base")
	if err != nil {
		t.Fatal(err)
	}
	fr := tokens.DefaultFraming
	count := func(msgs []chat.Message) int64 {
		var n int64
		for i := range msgs {
			n += tokens.CountMessage(enc, fr, &msgs[i]).Tokens
		}
		return n
	}
	for _, tc := range []struct {
		name    string
		d       door
		fixture string
		list    string // the body's array holding the carried item
		carried string // its text
		framed  bool   // framed as an item of its own
		drop    func(v map[string]any) bool
	}{
		{"responses", openAIResponses{newMemo(memoBytes)}, "requests/responses.json", "input", "Looking for the function.", true,
			func(v map[string]any) bool { return v["type"] == "reasoning" }},
		{"anthropic", anthropicMessages{newMemo(memoBytes)}, "requests/anthropic.json", "messages", "I should read calc.py first.", false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := fixture(t, tc.fixture)
			with := parseFixture(t, tc.d, raw)
			// The same request without the carried item.
			var body map[string]any
			if err := json.Unmarshal(raw, &body); err != nil {
				t.Fatal(err)
			}
			list := body[tc.list].([]any)
			var kept []any
			for _, e := range list {
				v := e.(map[string]any)
				if tc.drop != nil && tc.drop(v) {
					continue
				}
				if blocks, ok := v["content"].([]any); ok && tc.drop == nil {
					var bs []any
					for _, b := range blocks {
						if b.(map[string]any)["type"] != "thinking" {
							bs = append(bs, b)
						}
					}
					v["content"] = bs
				}
				kept = append(kept, v)
			}
			body[tc.list] = kept
			stripped, _ := json.Marshal(body)
			without := parseFixture(t, tc.d, stripped)
			if len(with) != len(without) {
				t.Fatalf("%d messages with the carried item, %d without", len(with), len(without))
			}
			// The message that carried it (the rest are compared as
			// parsed again: JSON written again counts differently).
			at := -1
			for i := range with {
				if len(with[i].Metadata[chat.MetaCarried]) > 0 {
					at = i
				}
			}
			if at < 0 {
				t.Fatal("no message keeps the carried text")
			}
			want := int64(enc.Count(tc.carried))
			if tc.framed {
				want += int64(fr.PerMessage)
			}
			if got := count(with[at:at+1]) - count(without[at:at+1]); got != want {
				t.Errorf("the carried item adds %d tokens to the count of message %d; its text and framing are %d", got, at, want)
			}
			// A placeholder of the message keeps its metadata but is sent
			// without what it carried.
			ph, bare := with[at], with[at]
			ph.Kind = chat.KindPlaceholder
			bare.Metadata = maps.Clone(bare.Metadata)
			delete(bare.Metadata, chat.MetaCarried)
			if n, base := tokens.CountMessage(enc, fr, &ph).Tokens, tokens.CountMessage(enc, fr, &bare).Tokens; n != base {
				t.Errorf("a placeholder keeping the original's metadata counts %d tokens, %d without what the original carried", n, base)
			}
		})
	}
}

// parseFixture parses a request body with door d and returns its messages.
func parseFixture(t *testing.T, d door, raw []byte) []chat.Message {
	t.Helper()
	body, err := scanBody(raw)
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.parse(body)
	if err != nil {
		t.Fatal(err)
	}
	return c.msgs
}
