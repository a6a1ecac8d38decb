package gateway

import (
	"encoding/json"
	"sync"
	"unsafe"

	"github.com/contextd/contextd/internal/chat"
)

// A coding agent sends the same tools with every request: tens of KB of
// JSON (30 tools, 59 KB in gatewaybench's tools cell), whose parse — an
// encoding/json pass over each tool — was about 40 % of the gateway's own
// CPU a request in that cell (docs/performance.md, "The session row's
// tools"). The doors' tools are kept by their exact bytes, as parsed
// lately, and a request whose tools are the same bytes takes a copy of
// the list (a chat.Tool holds only strings, so nothing a caller does to it
// reaches the memo). A request whose tools fail to parse is not kept: it
// is parsed, and refused, each time.

// toolsMemoBytes bounds what the memo keeps: the texts and their parsed
// tools (memoCost), whose lists can be many times their text's bytes (a
// tool of three bytes, `{}`, is a chat.Tool of three strings); past it,
// the memo starts over. toolsMemoMin: shorter texts are parsed each time,
// which costs less than the lookup; toolsMemoMax: a text longer, or whose
// tools with it cost more, is parsed each time too, so one client's tools
// neither pass the bound nor wipe everyone else's (TestToolsMemoBounded,
// TestToolsMemoBoundsItsTools).
const (
	toolsMemoBytes = 8 << 20
	toolsMemoMin   = 1024
	toolsMemoMax   = toolsMemoBytes / 4
)

// toolsShape is how a door writes its tools: one memo each, since the
// same bytes read differently.
type toolsShape int

const (
	toolsChat      toolsShape = iota // Chat Completions: {"type":"function","function":{...}}
	toolsResponses                   // Responses: {"type":"function","name":...}
	toolsAnthropic                   // Messages: {"name":...,"input_schema":...}
	toolsShapes
)

type parsedTools struct {
	tools []chat.Tool
	marks bool // Anthropic: a tool carries a cache_control mark
}

var toolsMemo struct {
	mu    sync.Mutex
	by    [toolsShapes]map[string]parsedTools
	bytes int
}

// memoTools answers parse(raw) for the door's shape from the memo when it
// parsed the same bytes lately.
func memoTools(shape toolsShape, raw json.RawMessage, parse func() (parsedTools, error)) (parsedTools, error) {
	if len(raw) < toolsMemoMin || len(raw) > toolsMemoMax {
		return parse()
	}
	toolsMemo.mu.Lock()
	p, ok := toolsMemo.by[shape][string(raw)]
	toolsMemo.mu.Unlock()
	if ok {
		p.tools = append([]chat.Tool(nil), p.tools...)
		return p, nil
	}
	p, err := parse()
	if err != nil {
		return p, err
	}
	cost := memoCost(raw, p.tools)
	if cost > toolsMemoMax {
		return p, nil
	}
	kept := parsedTools{tools: append([]chat.Tool(nil), p.tools...), marks: p.marks}
	toolsMemo.mu.Lock()
	defer toolsMemo.mu.Unlock()
	if toolsMemo.by[shape] == nil || toolsMemo.bytes+cost > toolsMemoBytes {
		for i := range toolsMemo.by {
			toolsMemo.by[i] = map[string]parsedTools{}
		}
		toolsMemo.bytes = 0
	}
	if _, ok := toolsMemo.by[shape][string(raw)]; !ok {
		toolsMemo.by[shape][string(raw)] = kept
		toolsMemo.bytes += cost
	}
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
// Responses), memoized.
func openAITools(raw json.RawMessage, nested bool) ([]chat.Tool, error) {
	shape := toolsResponses
	if nested {
		shape = toolsChat
	}
	p, err := memoTools(shape, raw, func() (parsedTools, error) {
		tools, err := parseOpenAITools(raw, nested)
		return parsedTools{tools: tools}, err
	})
	return p.tools, err
}

// anTools reads Anthropic tools and whether one carries a cache mark,
// memoized.
func anTools(raw json.RawMessage) ([]chat.Tool, bool, error) {
	p, err := memoTools(toolsAnthropic, raw, func() (parsedTools, error) {
		tools, marks, err := parseAnTools(raw)
		return parsedTools{tools: tools, marks: marks}, err
	})
	return p.tools, p.marks, err
}
