package tokens

import (
	"math"
	"sync"
)

// noRank marks a pair that is not in the vocabulary.
const noRank = math.MaxInt32

// smallPiece is the longest piece merged with the simple quadratic scan,
// which beats the heap on short pieces; longer pieces use the heap.
const smallPiece = 128

// scratch holds the buffers of one merge, reused through a sync.Pool so that
// counting does not allocate on the hot path.
type scratch struct {
	parts []part
	nodes []node
	heap  []heapEntry
}

type part struct {
	start int32
	rank  int32 // rank of the pair starting at this part
}

type node struct {
	start, prev, next int32
	rank              int32 // rank of the pair (this, next)
	version           int32
}

type heapEntry struct {
	rank, start, node, version int32
}

type merger struct {
	ranks *rankTable
	pool  sync.Pool
}

func newMerger(ranks map[string]int32) *merger {
	m := &merger{ranks: newRankTable(ranks)}
	m.pool.New = func() any { return &scratch{} }
	return m
}

func (m *merger) rank(b string) int32 { return m.ranks.get(b) }

// count returns the number of tokens of one piece.
func (m *merger) count(piece string) int {
	if len(piece) == 1 || m.rank(piece) != noRank {
		return 1
	}
	n := 0
	m.merge(piece, func(int, int) { n++ })
	return n
}

// encode appends the token ids of one piece to out.
func (m *merger) encode(out []int, piece string) []int {
	if r := m.rank(piece); r != noRank {
		return append(out, int(r))
	}
	m.merge(piece, func(start, end int) { out = append(out, int(m.rank(piece[start:end]))) })
	return out
}

// merge runs byte-pair merging on piece and calls emit with the bounds of
// each resulting token, in order. The result equals tiktoken's: the pair with
// the lowest rank is merged first, the leftmost of equal ranks first.
func (m *merger) merge(piece string, emit func(start, end int)) {
	sc := m.pool.Get().(*scratch)
	defer m.pool.Put(sc)
	if len(piece) <= smallPiece {
		m.mergeSmall(sc, piece, emit)
		return
	}
	m.mergeHeap(sc, piece, emit)
}

// mergeSmall is tiktoken's own algorithm: rescan for the minimum each round.
func (m *merger) mergeSmall(sc *scratch, piece string, emit func(start, end int)) {
	parts := sc.parts[:0]
	for i := 0; i <= len(piece); i++ {
		parts = append(parts, part{start: int32(i), rank: noRank})
	}
	for i := 0; i+2 < len(parts); i++ {
		parts[i].rank = m.rank(piece[i : i+2])
	}
	pairRank := func(i int) int32 {
		if i+3 >= len(parts) {
			return noRank
		}
		return m.rank(piece[parts[i].start:parts[i+3].start])
	}
	for len(parts) > 2 {
		minRank, minAt := int32(noRank), -1
		for i := 0; i < len(parts)-2; i++ {
			if parts[i].rank < minRank {
				minRank, minAt = parts[i].rank, i
			}
		}
		if minAt < 0 {
			break
		}
		parts[minAt].rank = pairRank(minAt)
		if minAt > 0 {
			parts[minAt-1].rank = pairRank(minAt - 1)
		}
		parts = append(parts[:minAt+1], parts[minAt+2:]...)
	}
	for i := 0; i+1 < len(parts); i++ {
		emit(int(parts[i].start), int(parts[i+1].start))
	}
	sc.parts = parts[:0]
}

// mergeHeap merges with a linked list and a min-heap of candidate pairs, in
// O(n log n) for a piece of n bytes. Stale heap entries are skipped by
// version.
func (m *merger) mergeHeap(sc *scratch, piece string, emit func(start, end int)) {
	n := len(piece)
	nodes := sc.nodes[:0]
	for i := 0; i < n; i++ {
		nodes = append(nodes, node{start: int32(i), prev: int32(i - 1), next: int32(i + 1), rank: noRank})
	}
	nodes[n-1].next = -1
	end := func(i int32) int32 {
		if nodes[i].next < 0 {
			return int32(n)
		}
		return nodes[nodes[i].next].start
	}
	h := sc.heap[:0]
	push := func(e heapEntry) {
		h = append(h, e)
		for c := len(h) - 1; c > 0; {
			p := (c - 1) / 2
			if !less(h[c], h[p]) {
				break
			}
			h[c], h[p] = h[p], h[c]
			c = p
		}
	}
	pop := func() heapEntry {
		top := h[0]
		last := len(h) - 1
		h[0] = h[last]
		h = h[:last]
		for p := 0; ; {
			l, r, min := 2*p+1, 2*p+2, p
			if l < len(h) && less(h[l], h[min]) {
				min = l
			}
			if r < len(h) && less(h[r], h[min]) {
				min = r
			}
			if min == p {
				break
			}
			h[p], h[min] = h[min], h[p]
			p = min
		}
		return top
	}
	setPair := func(i int32) {
		nodes[i].version++
		nx := nodes[i].next
		if nx < 0 {
			nodes[i].rank = noRank
			return
		}
		r := m.rank(piece[nodes[i].start:end(nx)])
		nodes[i].rank = r
		if r != noRank {
			push(heapEntry{rank: r, start: nodes[i].start, node: i, version: nodes[i].version})
		}
	}
	for i := 0; i+1 < n; i++ {
		setPair(int32(i))
	}
	for len(h) > 0 {
		e := pop()
		if nodes[e.node].version != e.version {
			continue
		}
		// Merge node e.node with its next.
		i := e.node
		nx := nodes[i].next
		nodes[i].next = nodes[nx].next
		if nodes[nx].next >= 0 {
			nodes[nodes[nx].next].prev = i
		}
		nodes[nx].version++ // invalidate entries of the removed node
		setPair(i)
		if p := nodes[i].prev; p >= 0 {
			setPair(p)
		}
	}
	for i := int32(0); i >= 0; i = nodes[i].next {
		emit(int(nodes[i].start), int(end(i)))
	}
	sc.nodes = nodes[:0]
	sc.heap = h[:0]
}

func less(a, b heapEntry) bool {
	if a.rank != b.rank {
		return a.rank < b.rank
	}
	return a.start < b.start
}
