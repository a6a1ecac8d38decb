package gateway

import (
	"encoding/json"
	"unsafe"

	"github.com/contextd/contextd/internal/chat"
)

// A coding agent sends the same tools with every request: tens of KB of
// JSON (30 tools, 59 KB in gatewaybench's tools cell), whose parse — an
// encoding/json pass over each tool — was about 40 % of the gateway's own
// CPU a request in that cell (docs/performance.md, "The session row's
// tools"). The doors' tools lists are entries of the gateway's memo
// (memo.go, CONTEXTD_GATEWAY_MEMO_BYTES), keyed by the door and the list's
// exact bytes: a request whose tools are the same bytes as a list parsed
// lately takes a copy of it (a chat.Tool holds only strings, so nothing a
// caller does to it reaches the memo). An entry is charged what it keeps,
// the text and its parsed tools (memoCost), whose lists can be many times
// their text's bytes (a tool of three bytes, `{}`, is a chat.Tool of three
// strings). As any entry, one that costs more than a quarter of the bound
// is parsed each time, so one client's tools neither pass the bound nor
// wipe everyone else's (TestToolsMemoBounded, TestToolsMemoBoundsItsTools);
// so is a list that fails to parse (refused each time) and one shorter
// than toolsMemoMin, whose parse costs less than the lookup.
const toolsMemoMin = 1024

type parsedTools struct {
	tools []chat.Tool
	marks bool // Anthropic: a tool carries a cache_control mark
}

// toolsKey is the reference of a door's tools list of bytes raw: hashed as
// a message of those bytes would be (a list is never a message's bytes,
// an object; and an entry is taken only for its own kind, memoRef.same).
func toolsKey(door string, raw []byte) memoRef {
	k := memoKey(door, raw)
	k.tools = true
	return k
}

// memoTools answers parse(raw) for the door from m when it parsed the
// same bytes lately (no memo: parsed).
func memoTools(m *memo, door string, raw json.RawMessage, parse func() (parsedTools, error)) (parsedTools, error) {
	if m == nil || len(raw) < toolsMemoMin || len(raw) > m.maxSize/4 {
		return parse()
	}
	k := toolsKey(door, raw)
	if e, ok := m.get(k); ok {
		p := e.tools
		p.tools = append([]chat.Tool(nil), p.tools...)
		return p, nil
	}
	p, err := parse()
	if err != nil {
		return p, err
	}
	m.keep(k, memoEntry{tools: parsedTools{tools: append([]chat.Tool(nil), p.tools...), marks: p.marks}}, memoCost(raw, p.tools))
	return p, nil
}

// memoCost is what keeping raw and its tools holds: the text (the key),
// the list, and each non-empty string with its allocation's overhead
// (counted as 16 bytes, more than the allocator's rounding of a small
// string).
func memoCost(raw json.RawMessage, tools []chat.Tool) int {
	n := len(raw) + len(tools)*int(unsafe.Sizeof(chat.Tool{}))
	for _, t := range tools {
		for _, s := range [...]string{t.Name, t.Description, t.Parameters} {
			if s != "" {
				n += len(s) + 16
			}
		}
	}
	return n
}

// openAITools reads OpenAI tools (nested: Chat Completions; flat:
// Responses), memoized in m.
func openAITools(m *memo, raw json.RawMessage, nested bool) ([]chat.Tool, error) {
	door := doorOpenAIResponses
	if nested {
		door = doorOpenAIChat
	}
	p, err := memoTools(m, door, raw, func() (parsedTools, error) {
		tools, err := parseOpenAITools(raw, nested)
		return parsedTools{tools: tools}, err
	})
	return p.tools, err
}

// anTools reads Anthropic tools and whether one carries a cache mark,
// memoized in m.
func anTools(m *memo, raw json.RawMessage) ([]chat.Tool, bool, error) {
	p, err := memoTools(m, doorAnthropic, raw, func() (parsedTools, error) {
		tools, marks, err := parseAnTools(raw)
		return parsedTools{tools: tools, marks: marks}, err
	})
	return p.tools, p.marks, err
}
