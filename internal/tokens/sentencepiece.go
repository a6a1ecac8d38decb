package tokens

import (
	"math/bits"
	"sync"
	"unicode/utf8"
)

// spModel is a SentencePiece-style BPE as Hugging Face tokenizers and
// transformers.js run a tokenizer.json of model type BPE with byte_fallback
// and no pre-tokenizer (Gemma 3): every space becomes "▁", the text between
// added tokens is split into characters, and the adjacent pair with the
// lowest merge rank — the leftmost of equals — is merged until no pair is in
// the merge list; a character the vocabulary lacks becomes its UTF-8 bytes'
// <0xXX> tokens.
//
// github.com/eliben/go-sentencepiece implements SentencePiece's own BPE on a
// ModelProto, but it orders merges by the merged piece's score, while the
// tokenizer.json the model is served with orders them per pair (the merge
// list); the two disagree when a token has several splits. It also holds
// about 90 bytes per character of a text. So this engine is our own.
//
// Work is bounded without a pre-tokenizer: the text is cut between every
// two characters that no token holds side by side (computed from the
// vocabulary at load), which no merge can cross, so each word is merged
// alone with the same result. A word that is a token which merging its own
// characters yields (most words) costs one lookup; a short word is merged
// in place on the stack; a long one (a run without cuts) with a tree of
// block minima (spMinTree), 8 bytes per character of scratch.
type spModel struct {
	// whole are the tokens that merging their own characters yields.
	whole *rankTable
	ascii [128]int32 // single-character tokens, -1 for none
	chars table      // other single-character tokens, by rune
	// pairs maps two adjacent tokens to their merge's rank and merged
	// token; asciiPairs holds the pairs of two characters of asciiSlot.
	pairs      pairTable
	asciiPairs [129 * 129]uint64
	bytes      [256]int32
	// joinASCII (a bit per pair of asciiSlot characters) and join (other
	// pairs, key a<<32|b) hold the two characters that are adjacent inside
	// some token: the text is cut between any other two.
	joinASCII [(129*129 + 63) / 64]uint64
	join      table
	maxChars  int // the longest token, in characters
	maxBytes  int // the longest token, in bytes
	added     *spAdded
	pool      sync.Pool // *spScratch
}

const (
	spSpace = '▁'
	// spNone is the pair value of two symbols that do not merge.
	spNone = ^uint64(0)
	// spSmall is the longest word merged on the stack, spTiny the longest
	// merged in smaller arrays (most words).
	spSmall = 256
	spTiny  = 24
	// spDead marks a position merged into the symbol on its left; an id
	// below it, from spUnknown down, is a character the vocabulary lacks.
	spDead    = int32(-1)
	spUnknown = int32(-2)
	// spMaxWhole is the longest token (in bytes) looked up whole.
	spMaxWhole = 256
	// spPoolChars caps the scratch kept for reuse (in characters).
	spPoolChars = 1 << 16
)

// unknownID encodes a character the vocabulary lacks (or an invalid byte,
// as r = utf8.MaxRune+1+b) as a negative id.
func unknownID(r rune) int32 { return spUnknown - r }

// unknownBytes returns the UTF-8 bytes behind an unknown id.
func unknownBytes(id int32, buf []byte) []byte {
	r := spUnknown - id
	if r > utf8.MaxRune {
		return append(buf, byte(r-utf8.MaxRune-1))
	}
	return utf8.AppendRune(buf, r)
}

// charID returns the id of a single character's token or its unknown id.
func (m *spModel) charID(r rune) int32 {
	if r < 128 {
		if id := m.ascii[r]; id >= 0 {
			return id
		}
		return unknownID(r)
	}
	if id := m.chars.get(uint64(r) + 1); id >= 0 {
		return id
	}
	return unknownID(r)
}

// pair returns the rank and merged id of two adjacent symbols, or spNone.
func (m *spModel) pair(l, r int32) uint64 {
	if l < 0 || r < 0 {
		return spNone
	}
	return m.pairs.get(uint64(l)<<32 | uint64(r))
}

// cachedPair is pair through the text's pair cache, if it has one.
func (m *spModel) cachedPair(l, r int32, s *spSink) uint64 {
	if s.cache == nil || l < 0 || r < 0 {
		return m.pair(l, r)
	}
	key := 1<<63 | uint64(l)<<32 | uint64(r)
	e := &s.cache.pairs[(key*0x9E3779B97F4A7C15)>>(64-11)]
	if e.key != key {
		e.key, e.val = key, m.pairs.get(key&^(1<<63))
	}
	return e.val
}

// asciiSlot numbers the characters of asciiPairs: ASCII and "▁" (128), or
// -1.
func asciiSlot(r rune) int {
	switch {
	case r < 128:
		return int(r)
	case r == spSpace:
		return 128
	}
	return -1
}

// charPair is pair for two characters' tokens, from the dense table when
// both are in it (most initial pairs of most text).
func (m *spModel) charPair(a, b rune, l, r int32, s *spSink) uint64 {
	if i, j := asciiSlot(a), asciiSlot(b); i >= 0 && j >= 0 {
		return m.asciiPairs[i*129+j]
	}
	return m.cachedPair(l, r, s)
}

// pairTable is an open-addressing hash table from left<<32|right to
// rank<<32|merged, key and value side by side so that a lookup touches one
// cache line. Key 0 (<pad> with itself, never a merge) marks an empty slot.
type pairTable struct {
	slots []pairSlot
	shift uint
}

type pairSlot struct{ key, val uint64 }

func newPairTable(n int) pairTable {
	size := 1 << bits.Len(uint(n*2)) // load factor at most 1/2
	return pairTable{slots: make([]pairSlot, size), shift: uint(64 - bits.TrailingZeros(uint(size)))}
}

func (t *pairTable) put(key, val uint64) {
	for i := int((key * 0x9E3779B97F4A7C15) >> t.shift); ; i = (i + 1) & (len(t.slots) - 1) {
		if s := &t.slots[i]; s.key == 0 || s.key == key {
			s.key, s.val = key, val
			return
		}
	}
}

func (t *pairTable) get(key uint64) uint64 {
	for i := int((key * 0x9E3779B97F4A7C15) >> t.shift); ; i = (i + 1) & (len(t.slots) - 1) {
		switch s := &t.slots[i]; s.key {
		case key:
			return s.val
		case 0:
			return spNone
		}
	}
}

// spSink receives tokens: counted, and appended when ids is wanted.
type spSink struct {
	n      int
	ids    []int
	encode bool
	steps  int // heap operations of long words, for the linearity test
	cache  *spCache
}

// spCache is the scratch a long text is counted with: its words seen
// earlier (direct-mapped by a hash of the word; a long text repeats most of
// its words, and a word is merged once) and recent pair lookups (the merge
// table is 16 MB, and most of a text's pairs recur). The words are slices
// of the text, so they are cleared before the cache returns to the pool.
type spCache struct {
	words [spCacheMax]spCached
	mask  uint32                    // of the words this text uses: a power of two less one
	pairs [spPairCacheSize]pairSlot // key with bit 63 set; 0: empty
}

type spCached struct {
	word       string
	n          int32 // tokens
	start, end int32 // where its ids are in spSink.ids when encoding
}

const (
	// spCacheMax is the most words a cache holds (512 KB); a text uses
	// one entry per 8 bytes of it (rounded up to a power of two), at least
	// 512, so clearing the entries costs at most 4 bytes per byte of text.
	spCacheMax      = 1 << 14
	spCacheMinWords = 1 << 9
	spPairCacheSize = 1 << 11
	// spCacheMin is the shortest text that uses a word cache.
	spCacheMin = 4 << 10
)

var spCaches = sync.Pool{New: func() any { return new(spCache) }}

func wordHash(w string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(w); i++ {
		h = (h ^ uint32(w[i])) * 16777619
	}
	return h
}

func (s *spSink) add(m *spModel, id int32) {
	if id >= 0 {
		s.n++
		if s.encode {
			s.ids = append(s.ids, int(id))
		}
		return
	}
	var buf [utf8.UTFMax]byte
	b := unknownBytes(id, buf[:0])
	s.n += len(b)
	if s.encode {
		for _, c := range b {
			s.ids = append(s.ids, int(m.bytes[c]))
		}
	}
}

// run tokenizes text: added tokens first, then each stretch between them.
func (m *spModel) run(text string, s *spSink) {
	if len(text) >= spCacheMin && len(text) <= 1<<31-1 {
		s.cache = spCaches.Get().(*spCache)
		clear(s.cache.pairs[:]) // from another model, maybe
		size := min(max(1<<bits.Len(uint(len(text)/8-1)), spCacheMinWords), spCacheMax)
		s.cache.mask = uint32(size - 1)
		defer func() {
			clear(s.cache.words[:size])
			spCaches.Put(s.cache)
			s.cache = nil
		}()
	}
	start := 0
	first := &m.added.first
	for i := 0; i < len(text); {
		if !first[text[i]] {
			i++
			continue
		}
		l, id := m.added.match(text, i)
		if l == 0 {
			i++
			continue
		}
		if i > start {
			m.ordinary(text[start:i], s)
		}
		s.add(m, id)
		i += l
		start = i
	}
	if start < len(text) {
		m.ordinary(text[start:], s)
	}
}

// nextRune decodes the character at text[i] as the normalizer leaves it
// (a space is "▁"); an invalid byte is its own unknown character.
func nextRune(text string, i int) (rune, int) {
	if c := text[i]; c < utf8.RuneSelf {
		if c == ' ' {
			return spSpace, 1
		}
		return rune(c), 1
	}
	r, size := utf8.DecodeRuneInString(text[i:])
	if r == utf8.RuneError && size == 1 {
		return utf8.MaxRune + 1 + rune(text[i]), 1
	}
	return r, size
}

// joined reports whether some token holds character a followed by b.
func (m *spModel) joined(a, b rune) bool {
	if i, j := asciiSlot(a), asciiSlot(b); i >= 0 && j >= 0 {
		k := i*129 + j
		return m.joinASCII[k/64]&(1<<(k%64)) != 0
	}
	return m.join.get(uint64(a)<<32|uint64(b)) >= 0
}

// setJoined records that a token holds character a followed by b.
func (m *spModel) setJoined(a, b rune) {
	if i, j := asciiSlot(a), asciiSlot(b); i >= 0 && j >= 0 {
		k := i*129 + j
		m.joinASCII[k/64] |= 1 << (k % 64)
		return
	}
	m.join.put(uint64(a)<<32|uint64(b), 1)
}

// words cuts text into words between every two characters that no token
// holds side by side. A merged symbol is always a token, so no merge can
// cross such a cut, and merging each word alone gives the same tokens as
// merging the whole text.
func (m *spModel) words(text string, word func(string)) {
	start := 0
	prev, prevSlot := rune(-1), -1
	for i := 0; i < len(text); {
		r, size, slot := rune(text[i]), 1, int(text[i])
		switch {
		case r == ' ':
			r, slot = spSpace, 128
		case r >= utf8.RuneSelf:
			r, size = nextRune(text, i)
			slot = asciiSlot(r)
		}
		if i > start {
			var joined bool
			if slot >= 0 && prevSlot >= 0 {
				k := prevSlot*129 + slot
				joined = m.joinASCII[k/64]&(1<<(k%64)) != 0
			} else {
				joined = m.join.get(uint64(prev)<<32|uint64(r)) >= 0
			}
			if !joined {
				word(text[start:i])
				start = i
			}
		}
		prev, prevSlot = r, slot
		i += size
	}
	if start < len(text) {
		word(text[start:])
	}
}

func (m *spModel) ordinary(text string, s *spSink) {
	m.words(text, func(w string) { m.word(w, s) })
}

// word tokenizes one word (raw text: spaces not yet replaced), or copies
// its tokens from the word cache.
func (m *spModel) word(w string, s *spSink) {
	if s.cache == nil {
		m.tokenizeWord(w, s)
		return
	}
	e := &s.cache.words[wordHash(w)&s.cache.mask]
	if e.n > 0 && e.word == w {
		s.n += int(e.n)
		if s.encode {
			s.ids = append(s.ids, s.ids[e.start:e.end]...)
		}
		return
	}
	n, start := s.n, len(s.ids)
	m.tokenizeWord(w, s)
	*e = spCached{word: w, n: int32(s.n - n), start: int32(start), end: int32(len(s.ids))}
}

func (m *spModel) tokenizeWord(w string, s *spSink) {
	if len(w) <= m.maxBytes {
		var nb [spMaxWhole]byte
		norm := nb[:0]
		for i := 0; i < len(w) && len(norm) <= m.maxBytes; i++ {
			if w[i] == ' ' {
				norm = append(norm, "▁"...)
			} else {
				norm = append(norm, w[i])
			}
		}
		if len(norm) <= m.maxBytes {
			if id := m.whole.getBytes(norm); id != noRank {
				s.add(m, id)
				return
			}
		}
	}
	if n := utf8.RuneCountInString(w); n <= spSmall {
		m.mergeShort(w, n, s)
	} else {
		m.mergeLong(w, n, s)
	}
}

// mergeShort merges a word of n <= spSmall characters on the stack.
func (m *spModel) mergeShort(w string, n int, s *spSink) {
	if n <= spTiny {
		var ids [spTiny]int32
		var pv [spTiny]uint64
		m.mergeSmall(w, ids[:], pv[:], s)
		return
	}
	var ids [spSmall]int32
	var pv [spSmall]uint64
	m.mergeSmall(w, ids[:], pv[:], s)
}

// mergeSmall merges a word of at most len(ids) characters in ids and pv
// (pv[k]: the pair of ids[k], ids[k+1]), arrays on the caller's stack:
// each round takes the leftmost lowest-ranked pair.
func (m *spModel) mergeSmall(w string, ids []int32, pv []uint64, s *spSink) {
	n := 0
	prev := rune(-1)
	for i := 0; i < len(w); {
		r, size := nextRune(w, i)
		ids[n] = m.charID(r)
		if n > 0 {
			pv[n-1] = m.charPair(prev, r, ids[n-1], ids[n], s)
		}
		prev = r
		n++
		i += size
	}
	for n > 1 {
		best := -1
		bv := spNone
		for k := 0; k+1 < n; k++ {
			if pv[k] < bv {
				bv, best = pv[k], k
			}
		}
		if best < 0 {
			break
		}
		ids[best] = int32(uint32(bv))
		copy(ids[best+1:n-1], ids[best+2:n])
		if best+2 < n {
			copy(pv[best+1:], pv[best+2:n-1])
		}
		n--
		if best+1 < n {
			pv[best] = m.cachedPair(ids[best], ids[best+1], s)
		}
		if best > 0 {
			pv[best-1] = m.cachedPair(ids[best-1], ids[best], s)
		}
	}
	for _, id := range ids[:n] {
		s.add(m, id)
	}
}

// spScratch is the scratch of mergeLong: per character position its symbol
// id (spDead inside a merged symbol) and the rank of the pair it starts,
// and a tree of minima over them.
type spScratch struct {
	ids  []int32
	rank []uint32
	tree spMinTree
}

const spNoRank = ^uint32(0)

// mergeLong merges a word of n characters, taking each time the leftmost
// lowest-ranked pair from a tree of block minima (spMinTree): 8 bytes per
// character and O(log n / log 32) work per merge. A symbol is a token of at
// most maxChars characters (or one unknown character), so its neighbours
// are found by skipping at most maxChars dead positions and no links are
// kept.
func (m *spModel) mergeLong(w string, n int, s *spSink) {
	sc, _ := m.pool.Get().(*spScratch)
	if sc == nil || cap(sc.ids) < n {
		size := n
		if n <= spPoolChars {
			size = spPoolChars // one size, so pooled scratch always fits
		}
		sc = &spScratch{ids: make([]int32, size), rank: make([]uint32, size)}
	}
	ids, rank := sc.ids[:n], sc.rank[:n]
	k := 0
	prev := rune(-1)
	for i := 0; i < len(w); {
		r, size := nextRune(w, i)
		ids[k], rank[k] = m.charID(r), spNoRank
		if k > 0 {
			if v := m.charPair(prev, r, ids[k-1], ids[k], s); v != spNone {
				rank[k-1] = uint32(v >> 32)
			}
		}
		prev = r
		k++
		i += size
	}
	t := &sc.tree
	t.build(rank)
	next := func(p int) int {
		for p++; p < n && ids[p] == spDead; p++ {
		}
		return p
	}
	for {
		min := t.min()
		if min == spNone {
			break
		}
		s.steps++
		p := int(uint32(min))
		q := next(p)
		v := m.cachedPair(ids[p], ids[q], s)
		ids[p], ids[q] = int32(uint32(v)), spDead
		rank[p], rank[q] = spNoRank, spNoRank
		if r := next(p); r < n {
			if v := m.cachedPair(ids[p], ids[r], s); v != spNone {
				rank[p] = uint32(v >> 32)
			}
		}
		lo := p
		if p > 0 {
			l := p - 1
			for ids[l] == spDead {
				l--
			}
			rank[l] = spNoRank
			if v := m.cachedPair(ids[l], ids[p], s); v != spNone {
				rank[l] = uint32(v >> 32)
			}
			lo = l
		}
		t.update(rank, lo, q)
	}
	for k := 0; k < n; k++ {
		if ids[k] != spDead {
			s.add(m, ids[k])
		}
	}
	if n <= spPoolChars {
		m.pool.Put(sc)
	}
}

// spMinTree finds the leftmost lowest rank among positions: level 0 holds
// the minimum (rank<<32 | position) of each block of spBlock positions,
// each level above the minimum of spBlock entries below, up to a level of
// at most spBlock entries, which min scans. Updating a position rescans one
// block per level.
type spMinTree struct {
	levels [][]uint64
}

const spBlock = 32

func (t *spMinTree) build(rank []uint32) {
	t.levels = t.levels[:0]
	n := len(rank)
	for l := 0; ; l++ {
		size := (n + spBlock - 1) / spBlock
		if l < cap(t.levels) {
			t.levels = t.levels[:l+1] // reuses the level's pooled slice
		} else {
			t.levels = append(t.levels, nil)
		}
		if cap(t.levels[l]) < size {
			t.levels[l] = make([]uint64, size)
		}
		t.levels[l] = t.levels[l][:size]
		for b := range size {
			t.levels[l][b] = t.blockMin(rank, l, b)
		}
		if size <= spBlock {
			return
		}
		n = size
	}
}

// blockMin is the minimum of block b of the level below level l.
func (t *spMinTree) blockMin(rank []uint32, l, b int) uint64 {
	best := spNone
	if l == 0 {
		lo := b * spBlock
		for i, r := range rank[lo:min(lo+spBlock, len(rank))] {
			if r != spNoRank {
				if v := uint64(r)<<32 | uint64(lo+i); v < best {
					best = v
				}
			}
		}
		return best
	}
	below := t.levels[l-1]
	for _, v := range below[b*spBlock : min(b*spBlock+spBlock, len(below))] {
		best = min(best, v)
	}
	return best
}

// update recomputes the minima over positions lo..hi (a few blocks: two
// adjacent tokens at most).
func (t *spMinTree) update(rank []uint32, lo, hi int) {
	for l := range t.levels {
		lo, hi = lo/spBlock, hi/spBlock
		for b := lo; b <= hi; b++ {
			t.levels[l][b] = t.blockMin(rank, l, b)
		}
	}
}

func (t *spMinTree) min() uint64 {
	best := spNone
	for _, v := range t.levels[len(t.levels)-1] {
		best = min(best, v)
	}
	return best
}

// spAdded matches a tokenizer's added tokens in raw text, leftmost and
// longest first (transformers.js's trie; Hugging Face tokenizers' the same),
// with a byte trie.
type spAdded struct {
	first [256]bool
	next  map[uint32]int32 // node<<8|byte → child node
	id    []int32          // per node: the token ending there, or -1
}

func newSPAdded(tokens map[string]int32) *spAdded {
	a := &spAdded{next: make(map[uint32]int32), id: []int32{-1}}
	for t, id := range tokens {
		node := int32(0)
		for i := 0; i < len(t); i++ {
			k := uint32(node)<<8 | uint32(t[i])
			child, ok := a.next[k]
			if !ok {
				child = int32(len(a.id))
				a.id = append(a.id, -1)
				a.next[k] = child
			}
			node = child
		}
		a.id[node] = id
		a.first[t[0]] = true
	}
	return a
}

// match returns the length and id of the longest added token at text[i],
// or 0.
func (a *spAdded) match(text string, i int) (int, int32) {
	if !a.first[text[i]] {
		return 0, 0
	}
	node, best, bestID := int32(0), 0, int32(0)
	for j := i; j < len(text); j++ {
		child, ok := a.next[uint32(node)<<8|uint32(text[j])]
		if !ok {
			break
		}
		node = child
		if id := a.id[node]; id >= 0 {
			best, bestID = j+1-i, id
		}
	}
	return best, bestID
}

// split returns the added tokens and the words of text; for tests and tools.
func (m *spModel) split(text string) []string {
	var out []string
	start := 0
	words := func(seg string) { m.words(seg, func(w string) { out = append(out, w) }) }
	for i := 0; i < len(text); {
		l, _ := m.added.match(text, i)
		if l == 0 {
			i++
			continue
		}
		words(text[start:i])
		out = append(out, text[i:i+l])
		i += l
		start = i
	}
	words(text[start:])
	return out
}

// getBytes is get for a byte slice, without copying it.
func (t *rankTable) getBytes(b []byte) int32 {
	if len(b) > maxPacked {
		if r, ok := t.long[string(b)]; ok {
			return r
		}
		return noRank
	}
	var key uint64
	for i, c := range b {
		key |= uint64(c) << (8 * i)
	}
	return t.getPacked(key | uint64(len(b))<<56)
}
