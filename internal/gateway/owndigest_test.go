package gateway

import (
	"encoding/json"
	"testing"

	"github.com/contextd/contextd/internal/engine"
)

// TestSameDigestKeepsOwnItems: two messages of one request that say the
// same (one digest) but carry different items the domain does not model
// (reasoning, thinking) each go upstream as the client sent them.
func TestSameDigestKeepsOwnItems(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    door
		body string
		arr  string
	}{
		{"responses", openAIResponses{newMemo(memoBytes)}, `{"model":"m","input":[` +
			`{"role":"user","content":"a"},` +
			`{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"one"},{"type":"message","role":"assistant","id":"msg_1","content":[{"type":"output_text","text":"ok"}]},` +
			`{"role":"user","content":"b"},` +
			`{"type":"reasoning","id":"rs_2","summary":[],"encrypted_content":"two"},{"type":"message","role":"assistant","id":"msg_2","content":[{"type":"output_text","text":"ok"}]},` +
			`{"role":"user","content":"c"}]}`, "input"},
		{"chat", openAIChat{newMemo(memoBytes)}, `{"model":"m","messages":[` +
			`{"role":"user","content":"a"},{"role":"assistant","content":"ok","reasoning_content":"r1"},` +
			`{"role":"user","content":"b"},{"role":"assistant","content":"ok","reasoning_content":"r2"},` +
			`{"role":"user","content":"c"}]}`, "messages"},
		{"anthropic", anthropicMessages{newMemo(memoBytes)}, `{"model":"m","max_tokens":10,"messages":[` +
			`{"role":"user","content":[{"type":"text","text":"a"}]},` +
			`{"role":"assistant","content":[{"type":"thinking","thinking":"t1","signature":"s1"},{"type":"text","text":"ok"}]},` +
			`{"role":"user","content":[{"type":"text","text":"b"}]},` +
			`{"role":"assistant","content":[{"type":"thinking","thinking":"t2","signature":"s2"},{"type":"text","text":"ok"}]},` +
			`{"role":"user","content":[{"type":"text","text":"c"}]}]}`, "messages"},
	} {
		for round := range 2 { // cold, then from the memo
			b, err := scanBody([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			c, err := tc.d.parse(b)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if err := tc.d.build(b, c, c.msgs, engine.CacheHints{}); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			var sent, want map[string]any
			if err := json.Unmarshal(b.encode(), &sent); err != nil {
				t.Fatal(err)
			}
			_ = json.Unmarshal([]byte(tc.body), &want)
			g, _ := json.Marshal(sent[tc.arr])
			w, _ := json.Marshal(want[tc.arr])
			if string(g) != string(w) {
				t.Errorf("%s, round %d: upstream got\n%s\nwant\n%s", tc.name, round, g, w)
			}
		}
	}
}
