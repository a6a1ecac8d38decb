package gatewaytest

import "encoding/json"

// Provider compaction, as the providers count it: Anthropic's API ignores
// every message before the latest `compaction` block (server-side
// compaction); the Responses API reads a `compaction` item's
// encrypted_content as the state it compacted (counted with the item's
// bytes, like any other).

// dropped is how many bytes of a request's body the provider does not
// read: for Anthropic, the messages before the one holding the latest
// compaction block (as the body's JSON has them, with their commas).
func dropped(path string, body map[string]any) int {
	if !anthropicPath(path) {
		return 0
	}
	msgs, _ := body["messages"].([]any)
	latest := 0
	for i, m := range msgs {
		mm, _ := m.(map[string]any)
		for _, b := range Blocks(mm["content"]) {
			if b["type"] == "compaction" {
				latest = i
			}
		}
	}
	n := 0
	for _, m := range msgs[:latest] {
		b, _ := json.Marshal(m)
		n += len(b) + 1
	}
	return n
}

// compactedInput is what the provider bills as the input of a call it
// answers with a compaction block (reply.Compaction): the compaction's own
// iteration is left out of the top-level usage, and the message iteration
// reads the request without its messages, which the summary replaces.
func compactedInput(path string, body map[string]any, raw []byte, reply Reply) (int, bool) {
	if reply.Compaction == "" || !anthropicPath(path) {
		return 0, false
	}
	msgs, _ := body["messages"].([]any)
	b, _ := json.Marshal(msgs)
	return len(raw) - len(b) + len(reply.Compaction), true
}
