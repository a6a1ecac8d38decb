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
