package gateway

import "strings"

// A streamed answer that ends before its last event (the provider or the
// network cut it, the client went away, an error event ended it) was
// still billed by the provider: Anthropic bills the input it processed
// (its message_start said how much) and the output it generated. The
// gateway records what it knows, as an estimate (engine.ReportInput's
// Estimated, the ledger's estimated row), once:
//
//   - usage the stream carried whole (a Chat Completions usage chunk, a
//     Responses response.failed with its usage) is the provider's
//     figures and is recorded as they are, not estimated;
//   - otherwise the input it carried (Anthropic's message_start: input
//     and cache fields) or, when it carried none (OpenAI reports usage
//     last), contextd's own count of the request it sent; and as output
//     Anthropic's message_delta count if it came (final), else the
//     larger of the output it carried and the text relayed counted with
//     the session's encoding.
//
// A stream that brought no event at all, and a call that never reached
// the provider (no connection, a status other than 200), record nothing.
// An estimate neither anchors the session nor calibrates the model: the
// used percentage after the call stays contextd's own count.

// maxRelayedText bounds the text of a cut stream kept to be counted as
// its output (16 MiB, about 4M tokens: past any model's output limit).
// Anthropic's and Chat Completions' streamers keep their text for the
// reply anyway; Responses' keeps its deltas for this alone. Each partial
// gathers it in a relayedText, so what the recording holds past the
// request is at most this, not a copy of the whole answer.
const maxRelayedText = 16 << 20

// relayedText is a cut stream's text, its first maxRelayedText bytes.
type relayedText struct{ b strings.Builder }

// add appends s, or as much of it as there is room for.
func (t *relayedText) add(s string) {
	if room := maxRelayedText - t.b.Len(); room > 0 {
		t.b.WriteString(s[:min(len(s), room)])
	}
}

func (t *relayedText) String() string { return t.b.String() }

// full reports whether t holds maxRelayedText bytes: what comes is left out.
func (t *relayedText) full() bool { return t.b.Len() >= maxRelayedText }

// cutUsage is the usage to record for a stream st that ended before its
// last event, seen when an event of it came; ok is false when there is
// nothing to record.
func cutUsage(st streamer, seen bool) (usage, bool) {
	if !seen {
		return usage{}, false
	}
	u, text := st.partial()
	if u.ok {
		return u, true // the provider's whole usage came before the cut
	}
	u.ok, u.estimated, u.relayed = true, true, text
	return u, true
}
