package gateway

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/contextd/contextd/internal/engine"
)

// TestAnthropicUsage: Messages' input_tokens is the uncached input, the
// cache reads and writes are beside it; the door reports them as they
// are, in a JSON answer and in a stream (whose message_delta may repeat
// the input figures, cumulative). Before the fix the door reported
// input + reads + writes as the uncached input, and every cached token
// was counted twice.
func TestAnthropicUsage(t *testing.T) {
	d := anthropicMessages{}
	u, reply := d.answer(fixture(t, "usage/anthropic_answer.json"))
	checkBilled(t, "answer", u, 4, 17836, 1873, 96, 4+17836+1873)
	if len(reply) != 1 || len(reply[0].Parts) != 2 {
		t.Errorf("answer: reply %+v, want one message of a text and a tool call", reply)
	}
	u, _ = d.answer(fixture(t, "usage/anthropic_answer_nocache.json"))
	checkBilled(t, "answer without caching", u, 2095, 0, 0, 3, 2095)
	for _, name := range []string{"usage/anthropic_stream.sse", "usage/anthropic_stream_cumulative.sse"} {
		checkBilled(t, name, streamFixture(t, d.stream(nil, ""), name), 4, 17836, 1873, 96, 4+17836+1873)
	}
}

// TestAnthropicRoundTrip: a Claude Code request, parsed and built back
// with its own history, is what the client sent, field by field.
func TestAnthropicRoundTrip(t *testing.T) {
	c := roundTrip(t, anthropicMessages{}, "requests/anthropic.json", "messages")
	if len(c.msgs) < 5 || !c.clientMarks {
		t.Errorf("parsed %d messages, client marks %v", len(c.msgs), c.clientMarks)
	}
}

// TestAnthropicBlocksFromMemo: a Messages request parsed from the memo
// (each message's blocks split from its content without decoding them)
// goes upstream as the same JSON as one parsed cold, and as the blocks the
// messages stored (the path of a message the client did not send).
func TestAnthropicBlocksFromMemo(t *testing.T) {
	raw := fixture(t, "requests/anthropic.json")
	d := anthropicMessages{newMemo(memoBytes)}
	var got []any
	for i := range 4 { // cold, filling the memo, from it, from the stored blocks
		b, err := scanBody(raw)
		if err != nil {
			t.Fatal(err)
		}
		door := d
		if i == 0 {
			door = anthropicMessages{}
		}
		c, err := door.parse(b)
		if err != nil {
			t.Fatal(err)
		}
		if i == 3 {
			c.blocks = nil
		} else if len(c.blocks) == 0 {
			t.Errorf("parse %d kept none of the client's blocks", i)
		}
		if err := door.build(b, c, c.msgs, engine.CacheHints{}); err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(b.encode(), &v); err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	for i := 1; i < len(got); i++ {
		if !reflect.DeepEqual(got[i], got[0]) {
			g, _ := json.Marshal(got[i])
			w, _ := json.Marshal(got[0])
			t.Errorf("body %d differs:\n%s\nwant\n%s", i, g, w)
		}
	}
}
