package store

import (
	"hash/maphash"
	"slices"
	"sync"

	"github.com/contextd/contextd/internal/chat"
)

// A session row carries the client's tools as JSON text: with the real
// coding agents, tens of KB (30 tools of JSON Schema), decoded on every read
// of the row and encoded on every write — three reads and two writes a
// gateway request, where decoding 62 KB of tools took about 0.5 ms of CPU
// and encoding 0.14 ms (BenchmarkDecodeTools, BenchmarkEncodeTools), more
// than the rest of the store's work on the request. The tools of a
// conversation rarely change, so the codec keeps the texts it decoded or
// encoded lately with their tools, and answers from them when the text (to
// decode) or the tools (to encode) are the same, compared in full. A
// decoded list is handed out as a copy of the slice; a chat.Tool holds
// only strings, so nothing a caller does to it reaches the cache.

// toolsCacheBytes bounds the texts the codec keeps (and about as much again
// of their tools); past it, it starts over. toolsCacheMin: shorter texts
// are decoded each time, which costs less than the lookup; toolsCacheMax:
// longer ones too, so that one session's tools (CONTEXTD_MAX_COUNT_BYTES
// lets 8 MB of them through, longer once escaped) neither pass the bound
// nor wipe everyone else's (TestToolsCodecBounded).
const (
	toolsCacheBytes = 8 << 20
	toolsCacheMin   = 1024
	toolsCacheMax   = toolsCacheBytes / 4
)

type toolsEntry struct {
	text  string
	tools []chat.Tool
}

var toolsCache = struct {
	mu     sync.Mutex
	seed   maphash.Seed
	byText map[string]*toolsEntry
	byHash map[uint64]*toolsEntry
	bytes  int
}{seed: maphash.MakeSeed()}

// decodeTools reads a stored tools text.
func decodeTools(text string) ([]chat.Tool, error) {
	if len(text) < toolsCacheMin || len(text) > toolsCacheMax {
		var tools []chat.Tool
		return tools, DecodeJSON(text, &tools)
	}
	toolsCache.mu.Lock()
	e, ok := toolsCache.byText[text]
	toolsCache.mu.Unlock()
	if ok {
		return append([]chat.Tool(nil), e.tools...), nil
	}
	var tools []chat.Tool
	if err := DecodeJSON(text, &tools); err != nil {
		return nil, err
	}
	keepTools(&toolsEntry{text: text, tools: append([]chat.Tool(nil), tools...)}, hashTools(tools))
	return tools, nil
}

// encodeTools returns the stored text of tools.
func encodeTools(tools []chat.Tool) (string, error) {
	if len(tools) == 0 {
		return EncodeJSON(tools)
	}
	h := hashTools(tools)
	toolsCache.mu.Lock()
	e, ok := toolsCache.byHash[h]
	toolsCache.mu.Unlock()
	if ok && slices.Equal(e.tools, tools) {
		return e.text, nil
	}
	text, err := EncodeJSON(tools)
	if err != nil || len(text) < toolsCacheMin || len(text) > toolsCacheMax {
		return text, err
	}
	keepTools(&toolsEntry{text: text, tools: append([]chat.Tool(nil), tools...)}, h)
	return text, nil
}

// keepTools adds e to the cache, starting it over when it is full.
func keepTools(e *toolsEntry, h uint64) {
	toolsCache.mu.Lock()
	defer toolsCache.mu.Unlock()
	if _, ok := toolsCache.byText[e.text]; ok {
		return
	}
	if toolsCache.byText == nil || toolsCache.bytes+len(e.text) > toolsCacheBytes {
		toolsCache.byText, toolsCache.byHash, toolsCache.bytes = map[string]*toolsEntry{}, map[uint64]*toolsEntry{}, 0
	}
	toolsCache.byText[e.text], toolsCache.byHash[h] = e, e
	toolsCache.bytes += len(e.text)
}

// hashTools hashes every field of tools (a key to find them by, checked
// by equalTools).
func hashTools(tools []chat.Tool) uint64 {
	var h maphash.Hash
	h.SetSeed(toolsCache.seed)
	for _, t := range tools {
		for _, s := range [...]string{t.Name, t.Description, t.Parameters} {
			h.WriteString(s)
			h.WriteByte(0)
		}
	}
	return h.Sum64()
}
