package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/chat/chattest"
	"github.com/contextd/contextd/internal/store"
)

// TestFixedDigestMemo: the memoized digest of what precedes the messages
// is the one computed (json.Marshal's text of the tools, as the stored
// views were recorded with), the first time and from the memo, for no
// tools, an empty list and a coding agent's; and a change of any part
// after the memo kept it (a tool's parameters, the system prompt, the
// model) gives that part's digest, not the kept one.
func TestFixedDigestMemo(t *testing.T) {
	changed := chattest.AgentTools()
	changed[29].Parameters = `{"type":"object"}`
	for _, s := range []store.Session{
		{Model: "gpt-4o", SystemPrompt: "be brief"},
		{Model: "gpt-4o", SystemPrompt: "be brief", Tools: []chat.Tool{}},
		{Model: "gpt-4o", SystemPrompt: "be brief", Tools: chattest.AgentTools()},
		{Model: "gpt-4o", SystemPrompt: "be brief", Tools: changed},
		{Model: "gpt-4o", SystemPrompt: "be briefer", Tools: chattest.AgentTools()},
		{Model: "gpt-4.1", SystemPrompt: "be brief", Tools: chattest.AgentTools()},
	} {
		tools := s.Tools
		b, _ := json.Marshal(tools)
		h := sha256.New()
		fmt.Fprintf(h, "%d:%s\x00%d:%s\x00", len(s.Model), s.Model, len(s.SystemPrompt), s.SystemPrompt)
		h.Write(b)
		want := hex.EncodeToString(h.Sum(nil)[:16])
		for range 2 {
			if got := fixedDigest(s); got != want {
				t.Fatalf("%s, %q, %d tools: %s, want %s", s.Model, s.SystemPrompt, len(tools), got, want)
			}
		}
	}
}

// BenchmarkFixedDigest is a request's digest of its session's model,
// system prompt and tools (a coding agent's).
func BenchmarkFixedDigest(b *testing.B) {
	s := store.Session{Model: "gpt-4o", SystemPrompt: "be brief", Tools: chattest.AgentTools()}
	for b.Loop() {
		fixedDigest(s)
	}
}
