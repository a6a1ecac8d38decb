package gateway

import (
	"encoding/binary"
	"encoding/json"
	"hash/maphash"
	"maps"
	"slices"
	"sync"
	"unsafe"

	"github.com/contextd/contextd/internal/chat"
)

// memo keeps the domain messages a door made of a provider message (or of
// a run of Responses items), keyed by its bytes: a client resends its
// whole history every call, so only what is new is parsed and compared
// (setRaw). Bounded by the bytes it keeps; when full it starts over.
// Entries are copied in; what get returns shares their parts and
// metadata, which no caller changes (historyStamp copies a message before
// it is stamped to be appended).
//
// An entry is found by a fast hash of the bytes (maphash, seeded per
// process) and taken only when the bytes it was made of are the request's,
// compared in full: a resent message costs a hash and a comparison, not a
// SHA-256 (which was most of parsing a request of resent messages,
// docs/performance.md), and what it yields is exactly what parsing those
// bytes yields (TestMemoWarmIsCold). Two byte strings of one hash share a
// slot; the later one replaces the other. A door's tools lists are
// entries of the same memo (toolsmemo.go), charged to the same bound.
type memo struct {
	mu      sync.Mutex
	maxSize int
	size    int
	entries map[memoHash]memoEntry
}

// memoHash is a door's hash of a message's bytes (memoKey) or of a run of
// Responses items (runKey).
type memoHash uint64

// memoSeed seeds the memo's hashes: random per process, so no client can
// choose bytes that collide (a collision would only cost a parse).
var memoSeed = maphash.MakeSeed()

// memoRef is what a memo entry is looked up by: the hash, and the door
// and bytes the entry must have been made of (raw, or the run's items in
// order). The doors share one memo: the same bytes are another message
// at another door.
type memoRef struct {
	h    memoHash
	door string
	raw  []byte
	run  []json.RawMessage
	// tools: raw is a door's tools list (toolsKey), not a message.
	tools bool
}

// same reports whether b, the bytes an entry was made of (memoRef.bytes),
// are k's.
func (k memoRef) same(b []byte) bool {
	if len(b) == 0 || b[0] != k.kind() {
		return false
	}
	b = b[1:]
	if len(b) <= len(k.door) || string(b[:len(k.door)]) != k.door || b[len(k.door)] != 0 {
		return false
	}
	b = b[len(k.door)+1:]
	if k.run == nil {
		return string(b) == string(k.raw)
	}
	for _, r := range k.run {
		n, w := binary.Uvarint(b)
		if w <= 0 || n != uint64(len(r)) || len(b)-w < len(r) || string(b[w:w+len(r)]) != string(r) {
			return false
		}
		b = b[w+len(r):]
	}
	return len(b) == 0
}

// kind is the first byte of k's bytes: a message's, a run's or a tools
// list's.
func (k memoRef) kind() byte {
	switch {
	case k.tools:
		return 't'
	case k.run == nil:
		return 'm'
	}
	return 'r'
}

// bytes is a copy of k's bytes for an entry to keep: its kind, its door
// and a zero byte, then the message's bytes, or each of the run's items
// after its length.
func (k memoRef) bytes() []byte {
	n := 2 + len(k.door) + len(k.raw)
	for _, r := range k.run {
		n += binary.MaxVarintLen64 + len(r)
	}
	b := append(make([]byte, 0, n), k.kind())
	b = append(append(b, k.door...), 0)
	if k.run == nil {
		return append(b, k.raw...)
	}
	for _, r := range k.run {
		b = binary.AppendUvarint(b, uint64(len(r)))
		b = append(b, r...)
	}
	return b
}

// memoEntry is what a door made of a provider message: the domain
// messages, and their identities and details (identityOf, detailOf), so a
// message resent is digested once, when it is first seen.
type memoEntry struct {
	msgs    []chat.Message
	ids     [][32]byte
	details [][16]byte
	// digests are msgs' stored digests (storedDigest), read once from
	// their metadata.
	digests [][32]byte
	// blocks, for the Anthropic door, is how many of the provider
	// message's content blocks each of msgs was made of.
	blocks []int
	// tools, for a tools list's entry (toolsKey), is what the door parsed
	// of it (and nothing above is set).
	tools parsedTools
	// raw is the bytes the entry was made of (memoRef.bytes), and size
	// what the memo accounts for it, in the memo's copy only.
	raw  []byte
	size int
}

// entryOf digests msgs.
func entryOf(msgs []chat.Message) memoEntry {
	e := memoEntry{msgs: msgs, ids: make([][32]byte, len(msgs)), details: make([][16]byte, len(msgs)), digests: make([][32]byte, len(msgs))}
	for i := range msgs {
		e.ids[i], e.details[i], e.digests[i] = identityOf(&msgs[i]), detailOf(&msgs[i]), storedDigest(&msgs[i])
	}
	return e
}

// take appends e's messages and their digests, identities and details to
// out.
func (out *memoEntry) take(e memoEntry) {
	out.msgs = append(out.msgs, e.msgs...)
	out.ids = append(out.ids, e.ids...)
	out.details = append(out.details, e.details...)
	out.digests = append(out.digests, e.digests...)
}

// memoBytes bounds what the memo keeps unless Config.MemoBytes says
// otherwise (CONTEXTD_GATEWAY_MEMO_BYTES).
const memoBytes = 64 << 20

// memoMessageBytes is what the memo accounts for a message besides its
// raw form (counted three times: the parsed text, the raw form a message
// may keep in its metadata, and the entry's copy it is found by): the
// message and its part, its metadata map with the digest, its identity,
// detail and stored digest, and the memo's key and entry. Measured by
// TestMemoBoundsMemory (about 750 bytes of heap a short message; 256,
// counted before, let short messages hold twice the bound).
const memoMessageBytes = 768

func newMemo(maxSize int) *memo {
	return &memo{maxSize: maxSize, entries: map[memoHash]memoEntry{}}
}

// memoKey is the reference of a door's message (or tools list) of bytes
// raw.
func memoKey(door string, raw []byte) memoRef {
	var h maphash.Hash
	h.SetSeed(memoSeed)
	h.WriteString(door)
	h.WriteByte(0)
	maphash.WriteComparable(&h, memoSum(raw))
	return memoRef{h: memoHash(h.Sum64()), door: door, raw: raw}
}

// memoSum hashes b in one call of the runtime's string hash (as a map of
// strings hashes its keys): on a long text several times faster than a
// maphash.Hash fed with it, which hashes it 128 bytes at a time
// (BenchmarkAgentTools: a 60 KB tools list, 7.6 us a read that way). The
// string is b's bytes, not a copy, and is not kept.
func memoSum(b []byte) uint64 {
	return maphash.Comparable(memoSeed, unsafe.String(unsafe.SliceData(b), len(b)))
}

// runKey is the reference of a run of a door's items, hashed without
// joining them: each item's memoSum, as memoKey hashes one.
func runKey(door string, raws []json.RawMessage) memoRef {
	var h maphash.Hash
	h.SetSeed(memoSeed)
	h.WriteString(door)
	h.WriteByte(1)
	for _, r := range raws {
		maphash.WriteComparable(&h, memoSum(r))
	}
	return memoRef{h: memoHash(h.Sum64()), door: door, run: raws}
}

// get is what the memo holds of k's bytes (memoKey, runKey).
func (m *memo) get(k memoRef) (memoEntry, bool) {
	if m == nil {
		return memoEntry{}, false
	}
	m.mu.Lock()
	e, ok := m.entries[k.h]
	m.mu.Unlock()
	if !ok || !k.same(e.raw) {
		return memoEntry{}, false
	}
	e.raw, e.size = nil, 0
	// Shared, not copied: a request changes only the messages it appends,
	// and historyStamp gives those parts and metadata of their own first.
	e.msgs = slices.Clip(e.msgs)
	return e, true
}

// put keeps what a door made of k's bytes (a raw form of rawLen bytes),
// and returns it digested (also with no memo).
func (m *memo) put(k memoRef, rawLen int, msgs []chat.Message) memoEntry {
	return m.putEntry(k, rawLen, entryOf(msgs))
}

// putEntry keeps e (digested: entryOf) as what k's bytes are and returns
// it.
func (m *memo) putEntry(k memoRef, rawLen int, e memoEntry) memoEntry {
	msgs := e.msgs
	if m == nil {
		return e
	}
	size := 3*rawLen + memoMessageBytes*len(msgs)
	m.keep(k, memoEntry{msgs: cloneMessages(msgs), ids: e.ids, details: e.details, digests: e.digests, blocks: e.blocks}, size)
	return e
}

// keep keeps kept, accounted size bytes, as what k's bytes are, unless it
// is over a quarter of the bound (then it is made each time: one
// request's bytes neither pass the bound nor wipe everyone else's).
func (m *memo) keep(k memoRef, kept memoEntry, size int) {
	if size > m.maxSize/4 {
		return
	}
	kept.raw, kept.size = k.bytes(), size
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.size+size > m.maxSize {
		m.entries, m.size = map[memoHash]memoEntry{}, 0
	}
	if old, ok := m.entries[k.h]; ok {
		// The same bytes again (two requests parsed them at once), or
		// others of the same hash: the newer replaces the older.
		m.size -= old.size
	}
	m.entries[k.h] = kept
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

// add appends e's messages, with their digests, identities and details,
// to c.
func (c *conversation) add(e memoEntry) {
	c.digests = append(c.digests, e.digests...) // every entry carries them (entryOf, take)
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
