package chat

import "fmt"

// Caps on a request's structure. Each message, part and tool call costs
// work and memory whatever its text (decoding, validation, framing, a
// stored row, an interrupted result for an unanswered call), so their
// number is bounded, per message and per request, on every RPC that takes
// messages (AppendMessages, PrepareContext, CountTokens, inline usage).
const (
	MaxPartsPerMessage     = 1_000
	MaxToolCallsPerMessage = 256
	MaxPartsPerRequest     = 100_000
	MaxToolCallsPerRequest = 10_000
)

// CheckStructure checks msgs against the structure caps. field is the
// request path of the list (e.g. "messages"); a violation names the
// message's parts (messages[3].parts) or the list. It looks at counts only,
// so it is cheap to run before anything else.
func CheckStructure(field string, msgs []Message) error {
	parts, calls := 0, 0
	for i := range msgs {
		n, c := len(msgs[i].Parts), 0
		for j := range msgs[i].Parts {
			if msgs[i].Parts[j].Type == PartToolCall {
				c++
			}
		}
		f := fmt.Sprintf("%s[%d].parts", field, i)
		switch {
		case n > MaxPartsPerMessage:
			return Invalid(f, "has %d parts; a message may have at most %d", n, MaxPartsPerMessage)
		case c > MaxToolCallsPerMessage:
			return Invalid(f, "has %d tool calls; a message may make at most %d", c, MaxToolCallsPerMessage)
		}
		parts, calls = parts+n, calls+c
		switch {
		case parts > MaxPartsPerRequest:
			return Invalid(field, "have more than %d parts together (at %s); a request may have at most %d", MaxPartsPerRequest, f, MaxPartsPerRequest)
		case calls > MaxToolCallsPerRequest:
			return Invalid(field, "make more than %d tool calls together (at %s); a request may make at most %d", MaxToolCallsPerRequest, f, MaxToolCallsPerRequest)
		}
	}
	return nil
}

// MaxToolCallsPerAppend bounds the tool calls one append stores
// (AppendMessages, PrepareContext): each is a row, and each left unanswered
// a stored interrupted result as well, all written while the store's writer
// is held (SQLite has one: 10 × 256 calls, about 7,700 rows, hold it about
// 0.2 s; see BenchmarkAppendToolCalls). Counting requests store nothing and
// keep MaxToolCallsPerRequest.
const MaxToolCallsPerAppend = 1_024

// CheckAppend is CheckStructure for a request that stores its messages.
func CheckAppend(field string, msgs []Message) error {
	if err := CheckStructure(field, msgs); err != nil {
		return err
	}
	calls := 0
	for i := range msgs {
		for j := range msgs[i].Parts {
			if msgs[i].Parts[j].Type == PartToolCall {
				calls++
			}
		}
		if calls > MaxToolCallsPerAppend {
			return Invalid(field, "make more than %d tool calls together (at %s[%d]); an append may store at most %d",
				MaxToolCallsPerAppend, field, i, MaxToolCallsPerAppend)
		}
	}
	return nil
}
