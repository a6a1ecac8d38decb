package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/contextd/contextd/internal/chat"
)

// TestIdentityOf: what clients change without meaning anything leaves a
// message's identity alone; what it says changes it.
func TestIdentityOf(t *testing.T) {
	call := func(args string, text string) chat.Message {
		m := chat.Message{Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: "c1", Name: "Edit", Arguments: args}}}}
		if text != "" {
			m.Parts = append([]chat.Part{{Type: chat.PartText, Text: text}}, m.Parts...)
		}
		return m
	}
	result := func(content string) chat.Message {
		return chat.Message{Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: "c1", Content: content}}}}
	}
	user := func(text string, extra ...string) chat.Message {
		m := chat.Message{Role: chat.RoleUser, Parts: []chat.Part{{Type: chat.PartText, Text: text}}}
		stamp(&m, extra)
		return m
	}
	same := []struct {
		name string
		a, b chat.Message
	}{
		{"arguments with defaults and other key order", call(`{"a":1}`, ""), call(`{"b": false, "a": 1}`, "")},
		{"space around the text", call(`{}`, "ok"), call(`{}`, " ok\n")},
		{"a cleared result", result("the whole file"), result("[Old tool result content cleared]")},
		// Qwen Code's --resume moves the date reminder out of the first
		// user message.
		{"scaffolding moved away", chat.Message{Role: chat.RoleUser, Parts: []chat.Part{
			{Type: chat.PartText, Text: "<system-reminder>\nThis is the Qwen Code.\n</system-reminder>"},
			{Type: chat.PartText, Text: "<system-reminder>\nThe current date is: Friday.\n</system-reminder>"},
			{Type: chat.PartText, Text: "fix a.go"}}},
			chat.Message{Role: chat.RoleUser, Parts: []chat.Part{
				{Type: chat.PartText, Text: "<system-reminder>\nThis is the Qwen Code.\n</system-reminder>"},
				{Type: chat.PartText, Text: "fix a.go"}}}},
	}
	for _, tc := range same {
		if identityOf(&tc.a) != identityOf(&tc.b) {
			t.Errorf("%s: identities differ", tc.name)
		}
	}
	differ := []struct {
		name string
		a, b chat.Message
	}{
		{"user text", user("fix a.go"), user("fix b.go")},
		{"user text in the same scaffolding", user("<system-reminder>x</system-reminder>fix a.go"), user("<system-reminder>x</system-reminder>fix b.go")},
		{"observations that are all scaffolding", user("<returncode>0</returncode>\n<output>a</output>"), user("<returncode>0</returncode>\n<output>b</output>")},
		{"scaffolding only, another one", user("<environment_context>/a</environment_context>"), user("<environment_context>/b</environment_context>")},
		{"audio data", user("", "AAAA"), user("", "BBBB")},
		{"assistant text", call(`{}`, "yes"), call(`{}`, "no")},
		{"another call", call(`{}`, ""), chat.Message{Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: "c2", Name: "Edit"}}}}},
	}
	for _, tc := range differ {
		if identityOf(&tc.a) == identityOf(&tc.b) {
			t.Errorf("%s: identities are the same", tc.name)
		}
	}
	// Chains: a difference anywhere changes every chain after it; the
	// system prompt is not part of them; the signal's scope is.
	conv := func(texts ...string) *conversation {
		c := &conversation{system: texts[0]}
		for _, s := range texts[1:] {
			c.msgs = append(c.msgs, user(s))
		}
		return c
	}
	a, b, sys := conv("s", "1", "2", "3"), conv("s", "1", "x", "3"), conv("other system", "1", "2", "3")
	for _, c := range []*conversation{a, b, sys} {
		historyChains(doorOpenAIChat, signal{}, c)
	}
	if a.chains[0] != b.chains[0] || a.chains[1] == b.chains[1] || a.chains[2] == b.chains[2] {
		t.Errorf("chains %v and %v", a.chains, b.chains)
	}
	if a.chains[2] != sys.chains[2] {
		t.Error("the system prompt changed the chains")
	}
	scoped := conv("s", "1", "2", "3")
	historyChains(doorOpenAIChat, signal{scope: "cc:1"}, scoped)
	if scoped.chains[0] == a.chains[0] {
		t.Error("a signal's scope did not change the chains")
	}
}

// TestSplitReplay: pieces within the budget, cut before user messages
// (here the only places: no tool rounds), nothing lost or reordered.
func TestSplitReplay(t *testing.T) {
	var msgs []chat.Message
	for i := range 30 {
		role := chat.RoleUser
		if i%3 != 0 {
			role = chat.RoleAssistant
		}
		msgs = append(msgs, chat.Message{Role: role, Parts: []chat.Part{{Type: chat.PartText, Text: string(rune('a' + i%26))}}})
	}
	pieces := splitReplay(msgs, 100)
	n := 0
	for i, p := range pieces {
		if i > 0 && p[0].Role != chat.RoleUser {
			t.Errorf("piece %d starts with %s", i, p[0].Role)
		}
		var size int64
		for j := range p {
			size += messageSize(&p[j])
		}
		if size > 100 && len(p) > 3 {
			t.Errorf("piece %d is %d bytes", i, size)
		}
		n += len(p)
	}
	if n != len(msgs) || len(pieces) < 3 {
		t.Errorf("%d pieces holding %d messages", len(pieces), n)
	}
}

// TestHistoryChainsAsStored: the chains a request computes are the ones
// stored (the history index and the messages' metadata hold them, so they
// may never change): each is the hex of the first 16 bytes of SHA-256 of
// the previous chain's bytes and the message's identity, from chainStart.
func TestHistoryChainsAsStored(t *testing.T) {
	c, _ := editFixture(5)
	prev := chainStart(doorAnthropic, "")
	for i, id := range c.ids {
		sum := sha256.Sum256(append(prev[:], id[:]...))
		copy(prev[:], sum[:16])
		if want := hex.EncodeToString(prev[:]); c.chains[i] != want {
			t.Fatalf("chain %d: %s, want %s", i, c.chains[i], want)
		}
	}
}

// BenchmarkHistoryChains: the chains of a request of 1,000 messages whose
// identities the door's memo gave (historyChains' own work a request).
func BenchmarkHistoryChains(b *testing.B) {
	c, _ := editFixture(1000)
	b.ReportAllocs()
	for b.Loop() {
		historyChains(doorAnthropic, signal{}, c)
	}
}
