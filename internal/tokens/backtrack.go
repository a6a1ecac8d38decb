package tokens

import (
	"math"
	"math/bits"
	"strings"
)

// This file is the linear-time half of the BPE engine: the backtracking
// encoder of GitHub's rust-gems `bpe` crate (crates/bpe, MIT licence),
// re-implemented over our rank table.
//
// Byte-pair merging (tiktoken's algorithm: merge the adjacent pair whose
// concatenation has the lowest rank, the leftmost first) gives every text
// exactly one encoding. Every token of that encoding encodes to itself, and
// two adjacent tokens a, b of it form a "valid pair": merging the bytes of a
// and b alone gives a, b again. Conversely, a sequence of tokens in which
// every adjacent pair is valid is the encoding (the crate's corollaries II
// and III). So the encoder walks the text left to right, always trying the
// longest token first, then shorter prefixes of it, and backs off one token
// when nothing fits. A bitfield remembers the positions from which no valid
// continuation exists; each position is given up at most once, which makes
// the walk linear in the length of the text, for a constant that depends on
// the vocabulary only (its longest token, and the depth of its merge tree).
//
// Whether a, b is a valid pair is decided without re-encoding: walking down
// the merge tree of both tokens, the pair is invalid exactly when some token
// straddling the boundary would have been merged before the merges that built
// a and b (isValidPair, the crate's is_valid_token_pair).
//
// The construction requires a vocabulary made by BPE training: each token of
// more than one byte is the merge of two tokens of lower rank. The
// cl100k_base and o200k_base vocabularies are; TestEveryTokenEncodesToItself
// checks every token of both, and the differential tests check whole texts.

// vocab holds the tables of the backtracking encoder, indexed by rank.
type vocab struct {
	data   string   // every token's bytes, concatenated in rank order
	starts []uint32 // token r is data[starts[r]:starts[r+1]]; empty for an unused rank

	nextPrefix []int32 // the longest token that is a proper prefix of token r, or -1
	splitL     []int32 // the two tokens token r was merged from; r, r for a base token
	splitR     []int32
	pairs      table // (left, right) → the rank of their merge, for every split

	root      [256]int32 // trie node of each first byte, or -1
	edges     table      // (node, byte) → child node
	nodeToken []int32    // token that ends at a trie node, or -1
	maxLen    int        // length of the longest token
}

// table is an open-addressing map from non-zero uint64 keys to int32 values.
type table struct {
	keys  []uint64
	vals  []int32
	shift uint
	n     int
}

func newTable(n int) table {
	size := 1 << bits.Len(uint(n*2)) // load factor at most 1/2
	return table{keys: make([]uint64, size), vals: make([]int32, size), shift: uint(64 - bits.TrailingZeros(uint(size)))}
}

func (t *table) put(key uint64, v int32) {
	if 2*(t.n+1) > len(t.keys) {
		bigger := newTable(2 * t.n)
		for i, k := range t.keys {
			if k != 0 {
				bigger.put(k, t.vals[i])
			}
		}
		*t = bigger
	}
	for i := int((key * 0x9E3779B97F4A7C15) >> t.shift); ; i = (i + 1) & (len(t.keys) - 1) {
		if t.keys[i] == 0 {
			t.keys[i], t.vals[i] = key, v
			t.n++
			return
		}
		if t.keys[i] == key {
			t.vals[i] = v
			return
		}
	}
}

// get returns the value of key, or -1.
func (t *table) get(key uint64) int32 {
	for i := int((key * 0x9E3779B97F4A7C15) >> t.shift); ; i = (i + 1) & (len(t.keys) - 1) {
		switch t.keys[i] {
		case key:
			return t.vals[i]
		case 0:
			return -1
		}
	}
}

func pairKey(a, b int32) uint64 { return 1<<63 | uint64(a)<<32 | uint64(b) }

func edgeKey(node int32, b byte) uint64 { return 1<<63 | uint64(node)<<8 | uint64(b) }

func newVocab(ranks map[string]int32, table *rankTable) *vocab {
	maxRank := int32(-1)
	for _, r := range ranks {
		maxRank = max(maxRank, r)
	}
	n := int(maxRank) + 1
	byRank := make([]string, n)
	total := 0
	for tok, r := range ranks {
		byRank[r] = tok
		total += len(tok)
	}
	v := &vocab{starts: make([]uint32, n+1)}
	var data strings.Builder
	data.Grow(total)
	for r, tok := range byRank {
		data.WriteString(tok)
		v.starts[r+1] = uint32(data.Len())
		v.maxLen = max(v.maxLen, len(tok))
	}
	v.data = data.String()
	v.buildTrie(byRank)
	v.nextPrefix = make([]int32, n)
	for r, tok := range byRank {
		v.nextPrefix[r] = -1
		for k := len(tok) - 1; k > 0; k-- {
			if p := table.get(tok[:k]); p != noRank {
				v.nextPrefix[r] = p
				break
			}
		}
	}
	v.buildSplits(table)
	return v
}

// buildTrie indexes every token by its bytes.
func (v *vocab) buildTrie(byRank []string) {
	for i := range v.root {
		v.root[i] = -1
	}
	v.edges = newTable(2 * len(byRank))
	v.nodeToken = make([]int32, 0, 2*len(byRank))
	newNode := func() int32 {
		v.nodeToken = append(v.nodeToken, -1)
		return int32(len(v.nodeToken) - 1)
	}
	for r, tok := range byRank {
		if tok == "" {
			continue
		}
		node := v.root[tok[0]]
		if node < 0 {
			node = newNode()
			v.root[tok[0]] = node
		}
		for i := 1; i < len(tok); i++ {
			child := v.edges.get(edgeKey(node, tok[i]))
			if child < 0 {
				child = newNode()
				v.edges.put(edgeKey(node, tok[i]), child)
			}
			node = child
		}
		v.nodeToken[node] = int32(r)
	}
}

// buildSplits recovers the merge that made each token: in rank order, the
// longest prefix token whose remainder is a token of lower rank and that
// forms a valid pair with it (the crate's split table).
func (v *vocab) buildSplits(ranks *rankTable) {
	n := len(v.nextPrefix)
	v.splitL, v.splitR = make([]int32, n), make([]int32, n)
	v.pairs = newTable(n)
	for id := int32(0); int(id) < n; id++ {
		v.splitL[id], v.splitR[id] = id, id
		tok := v.token(id)
		for left := v.nextPrefix[id]; left >= 0; left = v.nextPrefix[left] {
			right := ranks.get(tok[v.tokenLen(left):])
			if right != noRank && left < id && right < id && v.isValidPair(left, right) {
				v.pairs.put(pairKey(left, right), id)
				v.splitL[id], v.splitR[id] = left, right
				break
			}
		}
	}
}

func (v *vocab) token(r int32) string {
	return v.data[v.starts[r]:v.starts[r+1]]
}

func (v *vocab) tokenLen(r int32) int { return int(v.starts[r+1] - v.starts[r]) }

// longestMatch returns the longest token that is a prefix of s (non-empty),
// or -1 when not even its first byte is a token.
func (v *vocab) longestMatch(s string) int32 {
	node := v.root[s[0]]
	if node < 0 {
		return -1
	}
	best := v.nodeToken[node]
	for i := 1; i < len(s); i++ {
		node = v.edges.get(edgeKey(node, s[i]))
		if node < 0 {
			break
		}
		if t := v.nodeToken[node]; t >= 0 {
			best = t
		}
	}
	return best
}

// isValidPair reports whether merging the bytes of t1 followed by t2 gives
// t1, t2 again: no token across their boundary would have been merged first.
func (v *vocab) isValidPair(t1, t2 int32) bool {
	limit := int32(math.MaxInt32) // the lowest merge already known to happen
	for {
		if c := v.pairs.get(pairKey(t1, t2)); c >= 0 && c < limit {
			return false
		}
		// Undo the later of the two merges that built t1 and t2.
		if t1 > t2 {
			limit = t1
			t1 = v.splitR[t1]
			if t1 == limit {
				limit = t2 + 1
				t2 = v.splitL[t2]
				if t2+1 == limit {
					return true
				}
			}
		} else {
			limit = t2 + 1
			t2 = v.splitL[t2]
			if t2+1 == limit {
				limit = t1
				t1 = v.splitR[t1]
				if t1 == limit {
					return true
				}
			}
		}
	}
}

// pairCache remembers answers of isValidPair. Validity is a fact of the
// vocabulary, so an entry stays true across pieces and calls; a long run of
// one unit asks the same few pairs again and again.
type pairCache [1 << 10]uint64

func (c *pairCache) valid(v *vocab, t1, t2 int32) bool {
	key := 1<<63 | uint64(t1)<<32 | uint64(t2)<<1
	slot := &c[(key*0x9E3779B97F4A7C15)>>54]
	if *slot&^1 == key {
		return *slot&1 != 0
	}
	ok := v.isValidPair(t1, t2)
	*slot = key
	if ok {
		*slot |= 1
	}
	return ok
}

// stackChunk is the size of one chunk of the token stack. A chunked stack
// grows without copying, so a huge piece costs 4 bytes per token and no
// garbage.
const stackChunk = 1 << 12

// tokenStack is the backtracking encoder's stack of tokens.
type tokenStack struct {
	chunks [][]int32
	n      int
	tries  int // candidate tokens tried, the unit of work (for tests)
}

func (s *tokenStack) push(t int32) {
	c := s.n / stackChunk
	if c == len(s.chunks) {
		s.chunks = append(s.chunks, make([]int32, stackChunk))
	}
	s.chunks[c][s.n%stackChunk] = t
	s.n++
}

func (s *tokenStack) top() int32 {
	i := s.n - 1
	return s.chunks[i/stackChunk][i%stackChunk]
}

// each calls f with the tokens in order.
func (s *tokenStack) each(f func(int32)) {
	for i := 0; i < s.n; i += stackChunk {
		for _, t := range s.chunks[i/stackChunk][:min(stackChunk, s.n-i)] {
			f(t)
		}
	}
}

// backtrack encodes piece onto stack (emptied first); live is scratch for
// the bitfield and is returned, grown if need be; pairs caches pair checks. It returns false only if
// piece has a byte that is not a token, which a byte-level vocabulary never
// has.
func (v *vocab) backtrack(piece string, stack *tokenStack, live []uint64, pairs *pairCache) ([]uint64, bool) {
	n := len(piece)
	words := (n + 1 + 63) / 64
	if cap(live) < words {
		live = make([]uint64, words)
	}
	live = live[:words] // bit p: an encoding of piece[:p] may still be extended
	for i := range live {
		live[i] = math.MaxUint64
	}
	stack.n, stack.tries = 0, 0
	pos := 0
	next := v.longestMatch(piece)
	for next >= 0 {
		tok := next
		last := int32(-1)
		if stack.n > 0 {
			last = stack.top()
		}
		for {
			stack.tries++
			end := pos + v.tokenLen(tok)
			if live[end/64]&(1<<(end%64)) != 0 && (last < 0 || pairs.valid(v, last, tok)) {
				stack.push(tok)
				pos = end
				if pos == n {
					return live, true
				}
				next = v.longestMatch(piece[pos:])
				break
			}
			if shorter := v.nextPrefix[tok]; shorter >= 0 {
				tok = shorter
				continue
			}
			// Nothing fits after the encoding of piece[:pos]: no encoding
			// of the piece has a boundary at pos. Back off the last token
			// and try its shorter prefixes.
			live[pos/64] &^= 1 << (pos % 64)
			if last < 0 {
				return live, false
			}
			stack.n--
			pos -= v.tokenLen(last)
			next = last
			break
		}
	}
	return live, false
}
