package gateway_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// TestRepeatBeforeTheUnsignalledLookup: the order of identify's lookups
// (identify.go). A client without a signal asks for its summary (an aside
// of its session, whose answer the replica remembers), and sends its
// compacted history (the summary, the acknowledgement, a prompt: no call
// kept) while a round of the same session is still upstream: the session
// is busy, and the compacted history starts a session of its own. The
// same request again, once answered, is a repeat of that session. The
// lookup by the remembered summary, which came first, found the busy
// session free by then and recorded the request as its client compaction
// ("compacted": the answer the client holds is in another session); the
// repeat and pick lookups, which name the very session the request was
// answered in, now come first.
func TestRepeatBeforeTheUnsignalledLookup(t *testing.T) {
	s := start(t, nil)
	c := newCompressingClient(t, s, "O")
	c.rounds(3)
	c.finish()
	summary := "The work so far: three files were read, and the tests still fail in module two of the parser."
	c.ask(summary)
	round := append(slices.Clone(c.msgs), map[string]any{"role": "user", "content": "And the docs?"})
	compacted := []any{c.msgs[0],
		map[string]any{"role": "user", "content": "<state_snapshot>" + summary + "</state_snapshot>\n\n" + qwenTrailer},
		map[string]any{"role": "assistant", "content": "Got it. Thanks for the additional context!"},
		map[string]any{"role": "user", "content": "Now fix module two."},
	}
	s.fake.Script(gatewaytest.Reply{Text: "On it."}, gatewaytest.Reply{Text: "The docs are fine."})
	held := s.sendHeld(map[string]any{"model": "gpt-4o", "messages": round}) // the session busy
	resp, out := s.post("/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": compacted}, nil)
	if h := resp.Header.Get("X-Contextd-History"); resp.StatusCode != http.StatusOK || h != "new" {
		t.Fatalf("the compacted history, while its session is busy: %d, history %q, want new; %s", resp.StatusCode, h, out)
	}
	if h := held(); h != "extended" {
		t.Fatalf("the round: history %q, want extended", h)
	}
	s.fake.Script(gatewaytest.Reply{Text: "On it."})
	resp, out = s.post("/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": compacted}, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the compacted history again: %d %s", resp.StatusCode, out)
	}
	if h := resp.Header.Get("X-Contextd-History"); h != "repeated" {
		t.Errorf("the compacted history again: history %q, want repeated (in the session it was answered in)", h)
	}
}
