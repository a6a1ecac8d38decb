package gateway

import (
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/tokens"
)

// TestProviderCompactionItemsCounted: an Anthropic compaction block is
// carried with its message and its summary counted; the messages before
// it are where the provider stops reading (chat.ProviderReadsFrom), and
// one marked so counts nothing. A Responses compaction item counts 3/16
// of its encrypted_content's length, framed as an item; the input before
// it is read (it is not a point the provider stops at); two items that
// differ only in their encrypted content make different messages.
func TestProviderCompactionItemsCounted(t *testing.T) {
	enc, err := tokens.LoadEncoding("cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	fr := tokens.DefaultFraming
	count := func(m *chat.Message) int64 { return tokens.CountMessage(enc, fr, m).Tokens }

	summary := "Summary: calc.py's add() is fixed; the tests for mul() remain."
	an := parseFixture(t, anthropicMessages{newMemo(memoBytes)}, []byte(`{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[
		{"role":"user","content":"fix calc.py"},
		{"role":"assistant","content":[{"type":"compaction","content":"`+summary+`"},{"type":"text","text":"done"}]},
		{"role":"user","content":"now mul()"}]}`))
	if got := chat.ProviderReadsFrom(an); got != 1 {
		t.Fatalf("the provider reads from message %d, want 1", got)
	}
	plain := chat.Message{Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText, Text: "done"}}}
	if got, want := count(&an[1])-count(&plain), int64(enc.Count(summary)); got != want {
		t.Errorf("the compaction block counts %d tokens, its summary %d", got, want)
	}
	dropped := an[0]
	dropped.Metadata = map[string]string{chat.MetaProviderDropped: "1"}
	if n := count(&dropped); n != 0 || count(&an[0]) == 0 {
		t.Errorf("a message the provider dropped counts %d (%d before)", n, count(&an[0]))
	}

	encrypted := strings.Repeat("QUJD", 400) // 1,600 bytes

	// A block whose summary is hidden (content null): its encrypted
	// content's share; one with both: its summary.
	for _, tc := range []struct {
		block string
		want  int64
	}{
		{`{"type":"compaction","content":null,"encrypted_content":"` + encrypted + `"}`, 1600 * 3 / 16},
		{`{"type":"compaction","content":"` + summary + `","encrypted_content":"` + encrypted + `"}`, int64(enc.Count(summary))},
		// A client (an SDK that omits null fields) may send the block
		// without its content key: still an Anthropic block, of its
		// message, that the provider reads from.
		{`{"type":"compaction","encrypted_content":"` + encrypted + `"}`, 1600 * 3 / 16},
	} {
		m := parseFixture(t, anthropicMessages{newMemo(memoBytes)}, []byte(`{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[
			{"role":"user","content":"fix calc.py"},
			{"role":"assistant","content":[`+tc.block+`,{"type":"text","text":"done"}]},
			{"role":"user","content":"now mul()"}]}`))
		if chat.ProviderReadsFrom(m) != 1 {
			t.Errorf("%s: not a point the provider reads from", tc.block[:40])
		}
		if got := count(&m[1]) - count(&plain); got != tc.want {
			t.Errorf("%s: counts %d tokens, want %d", tc.block[:40], got, tc.want)
		}
	}

	// A failed compaction (the API's block with a null summary and null
	// encrypted content) holds no state to read from instead of the
	// history: not a point the provider reads from, so the messages
	// before it are charged.
	failed := parseFixture(t, anthropicMessages{newMemo(memoBytes)}, []byte(`{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[
		{"role":"user","content":"fix calc.py"},
		{"role":"assistant","content":[{"type":"compaction","content":null,"encrypted_content":null},{"type":"text","text":"done"}]},
		{"role":"user","content":"now mul()"}]}`))
	if got := chat.ProviderReadsFrom(failed); got != 0 {
		t.Errorf("a failed compaction block: the provider reads from message %d, want 0", got)
	}

	// Streamed: the summary comes in compaction_delta events (or with
	// the block's start), the encrypted content's latest stands.
	st := anthropicMessages{}.stream(nil, "")
	for _, ev := range []string{
		`{"type":"message_start","message":{"usage":{"input_tokens":10,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"compaction","content":null}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"compaction_delta","content":"` + summary + `","encrypted_content":"opaque"}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"done"}}`,
		`{"type":"content_block_stop","index":1}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}`,
		`{"type":"message_stop"}`,
	} {
		st.event("", []byte(ev))
	}
	_, reply, ok := st.result()
	if !ok || len(reply) != 1 || !reply[0].ProviderCompacted() || count(&reply[0])-count(&plain) != int64(enc.Count(summary)) {
		t.Errorf("streamed reply %+v (ok %v): want one message carrying the compaction's summary", reply, ok)
	}
	if raw := rawOf(&reply[0], doorAnthropic); !strings.Contains(string(raw), `"encrypted_content":"opaque"`) {
		t.Errorf("streamed reply's blocks %s lost the encrypted content", raw)
	}
	responses := func(content string) []chat.Message {
		return parseFixture(t, openAIResponses{newMemo(memoBytes)}, []byte(`{"model":"gpt-4o","input":[
			{"role":"user","content":"fix calc.py"},
			{"type":"compaction","id":"cmp_1","encrypted_content":"`+content+`"},
			{"role":"user","content":"now mul()"}]}`))
	}
	r := responses(encrypted)
	if len(r) != 3 || chat.ProviderReadsFrom(r) != 0 {
		t.Fatalf("%d messages, the provider reads from %d: want 3, 0", len(r), chat.ProviderReadsFrom(r))
	}
	empty := chat.Message{Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText}}}
	if got, want := count(&r[1])-count(&empty), int64(1600*3/16+fr.PerMessage); got != want {
		t.Errorf("the compaction item counts %d tokens, want %d", got, want)
	}
	other := responses(strings.Repeat("QUJE", 400))
	if storedDigest(&r[1]) == storedDigest(&other[1]) {
		t.Errorf("two compaction items of other contents have one digest")
	}
}
