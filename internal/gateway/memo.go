package gateway

import (
	"crypto/sha256"
	"maps"
	"slices"
	"sync"

	"github.com/contextd/contextd/internal/chat"
)

// memo keeps the domain messages a door made of a provider message (or of
// a run of Responses items), keyed by a digest of its bytes: a client
// resends its whole history every call, so only what is new is parsed and
// compared (setRaw). Bounded by the bytes it keeps; when full it starts
// over. Entries are copied in and out, so no caller shares them.
type memo struct {
	mu      sync.Mutex
	maxSize int
	size    int
	entries map[[32]byte][]chat.Message
}

// memoBytes bounds what the memo keeps unless Config.MemoBytes says
// otherwise (CONTEXTD_GATEWAY_MEMO_BYTES).
const memoBytes = 64 << 20

// memoMessageBytes is what the memo accounts for a message besides its
// raw form (counted twice: the parsed text and the raw form a message may
// keep in its metadata): the message and its part, its metadata map with
// the digest, and the memo's key and entry. Measured by
// TestMemoBoundsMemory (about 750 bytes of heap a short message; 256,
// counted before, let short messages hold twice the bound).
const memoMessageBytes = 768

func newMemo(maxSize int) *memo {
	return &memo{maxSize: maxSize, entries: map[[32]byte][]chat.Message{}}
}

func memoKey(door string, raw []byte) [32]byte {
	h := sha256.New()
	h.Write([]byte(door))
	h.Write([]byte{0})
	h.Write(raw)
	var k [32]byte
	h.Sum(k[:0])
	return k
}

func (m *memo) get(door string, raw []byte) ([]chat.Message, bool) {
	if m == nil {
		return nil, false
	}
	k := memoKey(door, raw)
	m.mu.Lock()
	msgs, ok := m.entries[k]
	m.mu.Unlock()
	if !ok {
		return nil, false
	}
	return cloneMessages(msgs), true
}

func (m *memo) put(door string, raw []byte, msgs []chat.Message) {
	if m == nil {
		return
	}
	size := 2*len(raw) + memoMessageBytes*len(msgs)
	k := memoKey(door, raw)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.size+size > m.maxSize {
		m.entries, m.size = map[[32]byte][]chat.Message{}, 0
	}
	if size > m.maxSize/4 {
		return
	}
	m.entries[k] = cloneMessages(msgs)
	m.size += size
}

func cloneMessages(msgs []chat.Message) []chat.Message {
	out := slices.Clone(msgs)
	for i := range out {
		out[i].Parts = slices.Clone(out[i].Parts)
		out[i].Metadata = maps.Clone(out[i].Metadata)
	}
	return out
}
