package gateway

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestCutUsage: what each door's streamer says of a real stream cut after
// its first events (cutusage.go): Anthropic's message_start input and
// cache fields, an estimate with the text relayed; a Chat usage chunk that
// came before the cut, the provider's figures; OpenAI streams cut before
// their usage, an estimate with no input (contextd counts it) and the text
// relayed.
func TestCutUsage(t *testing.T) {
	cases := []struct {
		name    string
		st      streamer
		fixture string
		events  int
		want    usage
	}{
		{"anthropic after message_start", &anStream{}, "usage/anthropic_stream.sse", 1,
			usage{ok: true, estimated: true, uncached: 4, cacheWrite: 1873, cacheRead: 17836, output: 1}},
		{"anthropic after a text and a tool's input", &anStream{}, "usage/anthropic_stream.sse", 8,
			usage{ok: true, estimated: true, uncached: 4, cacheWrite: 1873, cacheRead: 17836, output: 1,
				relayed: "I'll read the failing test first.{\"file_path\": \"/repo/calc_test.py\"}"}},
		// message_delta's output is the provider's final count: the
		// text relayed is not counted (contextd's count of it, with an
		// approximate encoding, may exceed it).
		{"anthropic after message_delta", &anStream{}, "usage/anthropic_stream.sse", 10,
			usage{ok: true, estimated: true, uncached: 4, cacheWrite: 1873, cacheRead: 17836, output: 96}},
		{"chat before its usage", &oaStream{}, "usage/chat_stream.sse", 2, usage{ok: true, estimated: true, relayed: "All 12 tests pass."}},
		{"chat after its usage", &oaStream{}, "usage/chat_stream.sse", 4, usage{ok: true, uncached: 19722 - 18944, cacheRead: 18944, output: 7}},
		{"responses before completed", &rStream{}, "usage/responses_stream.sse", 4,
			usage{ok: true, estimated: true, relayed: `{"command":["rg","-n","def add"]}`}},
		{"no event", &rStream{}, "usage/responses_stream.sse", 0, usage{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			evs := fixtureEvents(t, c.fixture)
			for _, ev := range evs[:c.events] {
				if _, last := c.st.event(ev.name, ev.data); last {
					t.Fatalf("event %q is the stream's last: not a cut", ev.name)
				}
			}
			u, _ := cutUsage(c.st, c.events > 0)
			if u != c.want {
				t.Errorf("usage %+v, want %+v", u, c.want)
			}
		})
	}
}

// TestCutUsageTextBounded: the text a cut stream keeps for its output
// count is at most maxRelayedText, however much came before the cut.
// Anthropic's and Chat's partial copied every block's or choice's text
// whole and cutUsage sliced the copy, so the recording held the whole
// answer (unbounded: the streamers keep it for the reply) past the
// request, not 16 MiB.
func TestCutUsageTextBounded(t *testing.T) {
	piece := strings.Repeat("x", 1<<20)
	quoted, _ := json.Marshal(piece)
	pieces := maxRelayedText/len(piece) + 2
	cases := []struct {
		name   string
		st     streamer
		events []fixtureEvent
	}{
		{"anthropic", &anStream{}, func() []fixtureEvent {
			evs := []fixtureEvent{{"message_start", []byte(`{"type":"message_start","message":{"usage":{"input_tokens":10,"output_tokens":1}}}`)},
				{"content_block_start", []byte(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)},
				{"content_block_start", []byte(`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"n","input":{}}}`)}}
			for range pieces {
				evs = append(evs, fixtureEvent{"content_block_delta", []byte(fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":%s}}`, 0, quoted))})
				evs = append(evs, fixtureEvent{"content_block_delta", []byte(fmt.Sprintf(`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":%s}}`, quoted))})
			}
			return evs
		}()},
		{"chat", &oaStream{}, func() []fixtureEvent {
			var evs []fixtureEvent
			for range pieces {
				evs = append(evs, fixtureEvent{"", []byte(fmt.Sprintf(`{"choices":[{"index":0,"delta":{"content":%s}},{"index":1,"delta":{"content":%s}}]}`, quoted, quoted))})
			}
			return evs
		}()},
		{"responses", &rStream{}, func() []fixtureEvent {
			var evs []fixtureEvent
			for range pieces {
				evs = append(evs, fixtureEvent{"response.output_text.delta", []byte(fmt.Sprintf(`{"type":"response.output_text.delta","delta":%s}`, quoted))})
			}
			return evs
		}()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, ev := range c.events {
				c.st.event(ev.name, ev.data)
			}
			if _, text := c.st.partial(); len(text) > maxRelayedText {
				t.Errorf("partial kept %d bytes of text, want at most %d", len(text), maxRelayedText)
			}
			u, _ := cutUsage(c.st, len(c.events) > 0)
			if len(u.relayed) != maxRelayedText {
				t.Errorf("relayed %d bytes, want the first %d", len(u.relayed), maxRelayedText)
			}
		})
	}
}
