package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
)

// The tests' memo holds 8 MiB (the doors' tools had a memo of their own of
// that bound before they were entries of the gateway's); an entry may
// take a quarter of it.
const (
	toolsMemoBytes = 8 << 20
	toolsMemoMax   = toolsMemoBytes / 4
)

// agentTools is a Chat Completions tools array of n tools of about 2 KB.
func agentTools(n int, tag string) json.RawMessage {
	var b strings.Builder
	b.WriteString("[")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"type":"function","function":{"name":"tool_%d","description":%q,"parameters":{"type":"object","properties":{"path":{"type":"string","description":%q}}}}}`,
			i, strings.Repeat(tag+" does one thing of a coding agent's. ", 30), strings.Repeat("A path. ", 80))
	}
	b.WriteString("]")
	return json.RawMessage(b.String())
}

// TestToolsMemo: the same tools bytes read again give the same tools, each
// caller its own list, whether parsed or answered from the memo (what one
// caller does to it reaches neither the memo nor another caller);
// Anthropic tools keep their cache mark; the same bytes read by another door's shape
// are parsed as that shape; tools that fail to parse are refused each
// time, naming the field.
func TestToolsMemo(t *testing.T) {
	m := newMemo(toolsMemoBytes)
	raw := agentTools(5, "memo")
	want, err := parseOpenAITools(raw, true)
	if err != nil {
		t.Fatal(err)
	}
	first, err := openAITools(m, raw, true)
	if err != nil {
		t.Fatal(err)
	}
	first[0].Name = "changed"
	first = append(first[:1], chat.Tool{Name: "appended"})
	for range 2 {
		got, err := openAITools(m, slices.Clone(raw), true)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("read again: %d tools (first %q), want %d (%q)", len(got), got[0].Name, len(want), want[0].Name)
		}
		// A list answered from the memo is the caller's too.
		got[0].Name = "changed from the memo"
	}
	// Flat (Responses) reading of nested tools: no name at the top, so
	// each is counted whole under its type's name.
	flat, err := openAITools(m, raw, false)
	if err != nil {
		t.Fatal(err)
	}
	if flat[0].Name != "function_0" {
		t.Errorf("the same bytes read as Responses tools: first named %q, want function_0", flat[0].Name)
	}
	// Anthropic tools: whether one carries a cache mark is kept with
	// them (the gateway then leaves the marks to the client).
	an := json.RawMessage(`[{"name":"marked","input_schema":{"type":"object"},"description":` +
		strconv.Quote(strings.Repeat("An Anthropic tool. ", 100)) + `,"cache_control":{"type":"ephemeral"}}]`)
	for i := range 2 {
		if tools, marks, err := anTools(m, an); err != nil || !marks || len(tools) != 1 || tools[0].Name != "marked" {
			t.Fatalf("Anthropic tools with a cache mark, read %d: %d tools, marks %v, err %v; want the one, marked", i+1, len(tools), marks, err)
		}
	}
	bad := json.RawMessage(`[` + strings.Repeat(`"not a tool",`, 100) + `1]`)
	for range 2 {
		var inv *chat.InvalidError
		if _, err := openAITools(m, bad, true); !errors.As(err, &inv) || inv.Violations[0].Field != "tools[0]" {
			t.Fatalf("invalid tools: %v, want an invalid argument naming tools[0]", err)
		}
	}
}

// TestToolsMemoBounded: the memo holds at most its bound (texts and tools:
// the tools are entries of the gateway's memo, charged to
// CONTEXTD_GATEWAY_MEMO_BYTES), and a text longer than a quarter of it is
// parsed without being kept.
func TestToolsMemoBounded(t *testing.T) {
	m := newMemo(toolsMemoBytes)
	for i := range 200 {
		if _, err := openAITools(m, agentTools(30, fmt.Sprint("bounded", i)), true); err != nil {
			t.Fatal(err)
		}
		m.mu.Lock()
		n := m.size
		m.mu.Unlock()
		if n > toolsMemoBytes {
			t.Fatalf("the memo holds %d bytes of texts, bound %d", n, toolsMemoBytes)
		}
	}
	huge := agentTools(toolsMemoMax/2000, "huge")
	if len(huge) <= toolsMemoMax {
		t.Fatalf("huge tools of %d bytes", len(huge))
	}
	if _, err := openAITools(m, huge, true); err != nil {
		t.Fatal(err)
	}
	if _, kept := m.get(toolsKey(doorOpenAIChat, huge)); kept {
		t.Errorf("tools of %d bytes were kept, past toolsMemoMax %d", len(huge), toolsMemoMax)
	}
}

// TestToolsMemoBoundsItsTools: the bound holds for what the memo keeps,
// the parsed tools with their texts — not only the texts. A text of
// many tiny tools (`[{},{},...]`, three bytes a tool) parses to a
// chat.Tool of three strings each, twenty times its text's bytes: the
// heap the memo keeps after reading such texts (measured after a GC) stays
// within toolsMemoBytes, while texts whose tools fit are still kept.
// Counting the texts alone, the memo kept 86 MB after these 4 MB.
func TestToolsMemoBoundsItsTools(t *testing.T) {
	m := newMemo(toolsMemoBytes)
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	for i := range 4 {
		// A distinct text of about 1 MB: 300,000 tools.
		raw := json.RawMessage(`[{"x":` + strconv.Itoa(i) + `}` + strings.Repeat(`,{}`, 300_000) + `]`)
		if _, err := openAITools(m, raw, true); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 8 {
		// Texts of 20,000 tiny tools: 60 KB whose tools are about 1.8
		// MB, kept, until they pass the bound together.
		raw := json.RawMessage(`[{"y":` + strconv.Itoa(i) + `}` + strings.Repeat(`,{}`, 20_000) + `]`)
		if _, err := openAITools(m, raw, true); err != nil {
			t.Fatal(err)
		}
	}
	after := heap()
	m.mu.Lock()
	kept := len(m.entries)
	m.mu.Unlock()
	if kept == 0 {
		t.Error("the memo kept none of the texts whose tools fit")
	}
	if after > before && after-before > toolsMemoBytes {
		t.Errorf("the memo keeps %.1f MB of heap after reading 4 MB of tiny tools; its bound is %d MB", float64(after-before)/1e6, toolsMemoBytes>>20)
	}
}

// BenchmarkAgentTools: a coding agent's 30 tools (about 60 KB) read by
// the Chat Completions door, as every request of its conversation does:
// parsed each time, and memoized.
func BenchmarkAgentTools(b *testing.B) {
	raw := agentTools(30, "bench")
	m := newMemo(memoBytes)
	memoized := func(raw json.RawMessage, nested bool) ([]chat.Tool, error) { return openAITools(m, raw, nested) }
	for name, read := range map[string]func(json.RawMessage, bool) ([]chat.Tool, error){"parse": parseOpenAITools, "memo": memoized} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				if _, err := read(raw, true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestToolsMemoKeyedByItsBytes: a tools list's entry is taken only for
// its own bytes at its own door, whoever sent them: other bytes of the
// same hash (another tenant's list, through the same gateway) miss, and so
// does a message of the same bytes.
func TestToolsMemoKeyedByItsBytes(t *testing.T) {
	m := newMemo(toolsMemoBytes)
	a, b := agentTools(5, "tenant a"), agentTools(5, "tenant b")
	if _, err := openAITools(m, a, true); err != nil {
		t.Fatal(err)
	}
	ka := toolsKey(doorOpenAIChat, a)
	if e, ok := m.get(ka); !ok || len(e.tools.tools) != 5 {
		t.Fatalf("tools kept: %v, %d", ok, len(e.tools.tools))
	}
	kb := toolsKey(doorOpenAIChat, b)
	kb.h = ka.h
	if _, ok := m.get(kb); ok {
		t.Error("other bytes of the same hash took the tools' entry")
	}
	km := memoKey(doorOpenAIChat, a)
	km.h = ka.h
	if _, ok := m.get(km); ok {
		t.Error("a message of the same bytes took the tools' entry")
	}
	kr := toolsKey(doorOpenAIResponses, a)
	kr.h = ka.h
	if _, ok := m.get(kr); ok {
		t.Error("the same bytes at another door took the tools' entry")
	}
}
