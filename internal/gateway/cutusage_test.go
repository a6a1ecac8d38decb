package gateway

import "testing"

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
		{"anthropic after message_delta", &anStream{}, "usage/anthropic_stream.sse", 10,
			usage{ok: true, estimated: true, uncached: 4, cacheWrite: 1873, cacheRead: 17836, output: 96,
				relayed: "I'll read the failing test first.{\"file_path\": \"/repo/calc_test.py\"}"}},
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
			u, _ := cutUsage(c.st, c.events)
			if u != c.want {
				t.Errorf("usage %+v, want %+v", u, c.want)
			}
		})
	}
}
