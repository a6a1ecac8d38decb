package gateway

import (
	"sync"

	"github.com/contextd/contextd/internal/chat"
)

// A coding agent sends the same tools with every request: tens of KB of
// JSON Schema (30 tools, about 70 KB, in gatewaybench -tools 30), which
// the doors read with encoding/json — the whole list, then each tool
// again — on every request: 43 % of the gateway's CPU at postgres 1×100
// with those tools (docs/performance.md, the fifth pass). toolsMemo keeps
// what a door read of the tools bytes it saw lately, keyed by the door and
// the bytes, compared in full, and hands out a copy of the slice (a
// chat.Tool holds only strings). A list that did not read (an error) is
// not kept: it is read again, and answers its error, every time.

// toolsMemoBytes bounds the bytes the memo keeps (and about as much again
// of the tools read from them); past it, it starts over. Shorter lists
// than toolsMemoMin are read each time (cheaper than keeping them);
// longer ones than toolsMemoMax too, so one client's tools neither pass
// the bound nor wipe everyone else's.
const (
	toolsMemoBytes = 8 << 20
	toolsMemoMin   = 1024
	toolsMemoMax   = toolsMemoBytes / 4
)

// readTools is what a door read of a request's tools: the tools, and
// whether any carried a cache mark (the Anthropic door's cache_control).
type readTools struct {
	tools []chat.Tool
	marks bool
}

var toolsMemo = struct {
	mu     sync.Mutex
	byDoor map[string]map[string]readTools
	bytes  int
}{}

// memoTools is read(raw) for door, from the memo when it read the same
// bytes lately.
func memoTools(door string, raw []byte, read func() ([]chat.Tool, bool, error)) ([]chat.Tool, bool, error) {
	if len(raw) < toolsMemoMin || len(raw) > toolsMemoMax {
		return read()
	}
	toolsMemo.mu.Lock()
	r, ok := toolsMemo.byDoor[door][string(raw)]
	toolsMemo.mu.Unlock()
	if ok {
		return append([]chat.Tool(nil), r.tools...), r.marks, nil
	}
	tools, marks, err := read()
	if err != nil {
		return tools, marks, err
	}
	toolsMemo.mu.Lock()
	defer toolsMemo.mu.Unlock()
	if toolsMemo.byDoor == nil || toolsMemo.bytes+len(raw) > toolsMemoBytes {
		toolsMemo.byDoor, toolsMemo.bytes = map[string]map[string]readTools{}, 0
	}
	if toolsMemo.byDoor[door] == nil {
		toolsMemo.byDoor[door] = map[string]readTools{}
	}
	if _, ok := toolsMemo.byDoor[door][string(raw)]; !ok {
		toolsMemo.byDoor[door][string(raw)] = readTools{tools: append([]chat.Tool(nil), tools...), marks: marks}
		toolsMemo.bytes += len(raw)
	}
	return tools, marks, nil
}
