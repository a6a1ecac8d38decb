package engine

import (
	"hash/maphash"
	"slices"
	"sync"
	"unsafe"

	"github.com/contextd/contextd/internal/chat"
)

// fixedDigest (cachehints.go) is taken at least once a request, and with
// a coding agent's tools (about 60 KB of JSON) encoding them and hashing
// the text with SHA-256 cost about 0.1 ms of CPU each time
// (BenchmarkFixedDigest), for parts that rarely change within a
// conversation. fixedDigestOf keeps the digests it computed lately with
// their parts, found by a maphash of them and compared in full (a decoded
// session's tools share their strings with the store's tools codec, so the
// comparison is mostly of pointers). A chat.Tool holds only strings: the
// copy of the list kept shares nothing a caller can change.
//
// Bounds: lists of fewer than fixedMemoMin bytes are digested each time
// (cheaper than the lookup); the parts kept (their strings and the list's
// copy, partsSize) are at most fixedMemoBytes in all, each entry at most a quarter of it; past it, the memo starts over.
const (
	fixedMemoMin   = 1024
	fixedMemoBytes = 8 << 20
)

type fixedEntry struct {
	model, systemPrompt string
	tools               []chat.Tool
	digest              string
}

var fixedMemo = struct {
	mu    sync.Mutex
	seed  maphash.Seed
	byKey map[uint64]*fixedEntry
	bytes int
}{seed: maphash.MakeSeed()}

// fixedDigestOf is fixedDigest of the model, system prompt and effective
// tools, memoized.
func fixedDigestOf(model, systemPrompt string, tools []chat.Tool) string {
	size := partsSize(model, systemPrompt, tools)
	if size < fixedMemoMin || size > fixedMemoBytes/4 {
		return computeFixedDigest(model, systemPrompt, tools)
	}
	var h maphash.Hash
	h.SetSeed(fixedMemo.seed)
	h.WriteString(model)
	h.WriteByte(0)
	h.WriteString(systemPrompt)
	h.WriteByte(0)
	for _, t := range tools {
		for _, s := range [...]string{t.Name, t.Description, t.Parameters} {
			h.WriteString(s)
			h.WriteByte(0)
		}
	}
	key := h.Sum64()
	fixedMemo.mu.Lock()
	e, ok := fixedMemo.byKey[key]
	fixedMemo.mu.Unlock()
	// A nil list and an empty one are equal to slices.Equal, but not to
	// json.Marshal (null, []): their digests differ.
	if ok && e.model == model && e.systemPrompt == systemPrompt && (e.tools == nil) == (tools == nil) && slices.Equal(e.tools, tools) {
		return e.digest
	}
	d := computeFixedDigest(model, systemPrompt, tools)
	e = &fixedEntry{model: model, systemPrompt: systemPrompt, tools: slices.Clone(tools), digest: d}
	fixedMemo.mu.Lock()
	defer fixedMemo.mu.Unlock()
	if fixedMemo.byKey == nil || fixedMemo.bytes+size > fixedMemoBytes {
		fixedMemo.byKey, fixedMemo.bytes = map[uint64]*fixedEntry{}, 0
	}
	if old, ok := fixedMemo.byKey[key]; ok {
		fixedMemo.bytes -= old.size()
	}
	fixedMemo.byKey[key] = e
	fixedMemo.bytes += size
	return d
}

// size is the bytes of e's parts (what fixedMemoBytes bounds).
func (e *fixedEntry) size() int { return partsSize(e.model, e.systemPrompt, e.tools) }

// partsSize is the bytes an entry of these parts keeps: their strings, and
// the copy of the list's headers (a tool of a one-byte name keeps 49).
func partsSize(model, systemPrompt string, tools []chat.Tool) int {
	n := len(model) + len(systemPrompt) + len(tools)*int(unsafe.Sizeof(chat.Tool{}))
	for _, t := range tools {
		n += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	return n
}
