package gateway

import (
	"crypto/sha256"
	"encoding/json"
	"maps"
	"slices"
	"sync"

	"github.com/contextd/contextd/internal/chat"
)

// memo keeps the domain messages a door made of a provider message (or of
// a run of Responses items), keyed by a digest of its bytes: a client
// resends its whole history every call, so only what is new is parsed and
// compared (setRaw). Bounded by the bytes it keeps; when full it starts
// over. Entries are copied in; what get returns shares their parts and
// metadata, which no caller changes (historyStamp copies a message before
// it is stamped to be appended).
type memo struct {
	mu      sync.Mutex
	maxSize int
	size    int
	entries map[[32]byte]memoEntry
}

// memoEntry is what a door made of a provider message: the domain
// messages, and their identities and details (identityOf, detailOf), so a
// message resent is digested once, when it is first seen.
type memoEntry struct {
	msgs    []chat.Message
	ids     [][32]byte
	details [][16]byte
	// blocks, for the Anthropic door, is how many of the provider
	// message's content blocks each of msgs was made of.
	blocks []int
}

// entryOf digests msgs.
func entryOf(msgs []chat.Message) memoEntry {
	e := memoEntry{msgs: msgs, ids: make([][32]byte, len(msgs)), details: make([][16]byte, len(msgs))}
	for i := range msgs {
		e.ids[i], e.details[i] = identityOf(&msgs[i]), detailOf(&msgs[i])
	}
	return e
}

// memoBytes bounds what the memo keeps unless Config.MemoBytes says
// otherwise (CONTEXTD_GATEWAY_MEMO_BYTES).
const memoBytes = 64 << 20

// memoMessageBytes is what the memo accounts for a message besides its
// raw form (counted twice: the parsed text and the raw form a message may
// keep in its metadata): the message and its part, its metadata map with
// the digest, its identity and detail, and the memo's key and entry. Measured by
// TestMemoBoundsMemory (about 750 bytes of heap a short message; 256,
// counted before, let short messages hold twice the bound).
const memoMessageBytes = 768

func newMemo(maxSize int) *memo {
	return &memo{maxSize: maxSize, entries: map[[32]byte]memoEntry{}}
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

// runKey is memoKey of the array of raws (the bytes joinJSON writes),
// hashed without joining them.
func runKey(door string, raws []json.RawMessage) [32]byte {
	h := sha256.New()
	h.Write([]byte(door))
	h.Write([]byte{0, '['})
	for i, r := range raws {
		if i > 0 {
			h.Write([]byte{','})
		}
		h.Write(r)
	}
	h.Write([]byte{']'})
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// get is what the memo holds under key k (memoKey, runKey).
func (m *memo) get(k [32]byte) (memoEntry, bool) {
	if m == nil {
		return memoEntry{}, false
	}
	m.mu.Lock()
	e, ok := m.entries[k]
	m.mu.Unlock()
	if !ok {
		return memoEntry{}, false
	}
	// Shared, not copied: a request changes only the messages it appends,
	// and historyStamp gives those parts and metadata of their own first.
	e.msgs = slices.Clip(e.msgs)
	return e, true
}

// put keeps what a door made of a raw form of rawLen bytes under key k,
// and returns it digested (also with no memo).
func (m *memo) put(k [32]byte, rawLen int, msgs []chat.Message) memoEntry {
	return m.putEntry(k, rawLen, entryOf(msgs))
}

// putEntry keeps e (digested: entryOf) under key k and returns it.
func (m *memo) putEntry(k [32]byte, rawLen int, e memoEntry) memoEntry {
	msgs := e.msgs
	if m == nil {
		return e
	}
	size := 2*rawLen + memoMessageBytes*len(msgs)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.size+size > m.maxSize {
		m.entries, m.size = map[[32]byte]memoEntry{}, 0
	}
	if size > m.maxSize/4 {
		return e
	}
	m.entries[k] = memoEntry{msgs: cloneMessages(msgs), ids: e.ids, details: e.details, blocks: e.blocks}
	m.size += size
	return e
}

func cloneMessages(msgs []chat.Message) []chat.Message {
	out := slices.Clone(msgs)
	for i := range out {
		out[i].Parts = slices.Clone(out[i].Parts)
		out[i].Metadata = maps.Clone(out[i].Metadata)
	}
	return out
}

// add appends e's messages, with their digests, identities and details,
// to c.
func (c *conversation) add(e memoEntry) {
	for i := range e.msgs {
		c.digests = append(c.digests, storedDigest(&e.msgs[i]))
	}
	c.msgs = append(c.msgs, e.msgs...)
	c.ids = append(c.ids, e.ids...)
	c.details = append(c.details, e.details...)
}

// reserve makes room in c for n messages.
func (c *conversation) reserve(n int) {
	c.msgs = slices.Grow(c.msgs, n)
	c.digests = slices.Grow(c.digests, n)
	c.ids = slices.Grow(c.ids, n)
	c.details = slices.Grow(c.details, n)
}
