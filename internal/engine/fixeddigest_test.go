package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unsafe"

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

// TestFixedDigestMemoNilTools: a session without tools (nil) and one with
// an empty list have the digests computed for each (json.Marshal's null
// and []), whichever the memo kept first; the system prompt is long
// enough for the memo to keep them.
func TestFixedDigestMemoNilTools(t *testing.T) {
	long := strings.Repeat("be brief. ", 200)
	for _, s := range []store.Session{
		{Model: "gpt-4o", SystemPrompt: long},
		{Model: "gpt-4o", SystemPrompt: long, Tools: []chat.Tool{}},
		{Model: "gpt-4o", SystemPrompt: long},
	} {
		want := computeFixedDigest(s.Model, s.SystemPrompt, s.Tools)
		if got := fixedDigest(s); got != want {
			t.Errorf("tools nil %v: %s, want %s", s.Tools == nil, got, want)
		}
	}
}

// TestFixedDigestMemoBound: the memo's bound counts what an entry keeps,
// the list's copy with its strings: lists of many tools of one-byte names
// (49 bytes kept a tool, 1 of them strings) keep at most about
// fixedMemoBytes.
func TestFixedDigestMemoBound(t *testing.T) {
	tools := make([]chat.Tool, 20000)
	for i := range tools {
		tools[i].Name = "a"
	}
	for i := range 200 {
		fixedDigestOf("gpt-4o", fmt.Sprint(i), tools)
	}
	fixedMemo.mu.Lock()
	defer fixedMemo.mu.Unlock()
	kept := 0
	for _, e := range fixedMemo.byKey {
		kept += len(e.tools) * int(unsafe.Sizeof(chat.Tool{}))
	}
	if kept > fixedMemoBytes {
		t.Errorf("the memo keeps %d bytes of lists, bound %d", kept, fixedMemoBytes)
	}
}
