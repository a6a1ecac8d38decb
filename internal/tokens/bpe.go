package tokens

import (
	"math"
	"sync"
)

// noRank marks a byte string that is not in the vocabulary.
const noRank = math.MaxInt32

// smallPiece is the longest piece merged with tiktoken's own scan, which is
// quadratic but fastest on the short pieces that make up ordinary text, and
// runs on the goroutine's stack. Longer pieces use the backtracking encoder
// (backtrack.go), linear in their length.
const smallPiece = 128

// Scratch of the backtracking encoder is pooled only up to these sizes, so
// that one huge piece does not leave megabytes in the pool.
const (
	poolStackChunks = 4       // 16K tokens (64 KB)
	poolBitsCap     = 1 << 10 // words (8 KB: pieces up to 64 KB)
)

// scratch holds the buffers of one long piece, reused through a sync.Pool.
type scratch struct {
	stack tokenStack
	live  []uint64
	pairs pairCache
}

type part struct {
	start int32
	rank  int32 // rank of the pair starting at this part
}

// merger is the BPE engine of one vocabulary: count and encode one piece of
// the pre-tokenizer's output, exactly as tiktoken does.
type merger struct {
	ranks *rankTable
	vocab *vocab
	pool  sync.Pool
}

func newMerger(ranks map[string]int32) *merger {
	table := newRankTable(ranks)
	m := &merger{ranks: table, vocab: newVocab(ranks, table)}
	m.pool.New = func() any { return &scratch{} }
	return m
}

func (m *merger) rank(b string) int32 { return m.ranks.get(b) }

// whole reports whether piece is one token.
func (m *merger) whole(piece string) bool {
	return len(piece) == 1 || (len(piece) <= m.vocab.maxLen && m.rank(piece) != noRank)
}

// count returns the number of tokens of one piece.
func (m *merger) count(piece string) int {
	if m.whole(piece) {
		return 1
	}
	if len(piece) <= smallPiece {
		n := 0
		m.mergeSmall(piece, func(int, int) { n++ })
		return n
	}
	n := 0
	m.backtrack(piece, func(s *tokenStack) { n = s.n })
	return n
}

// encode appends the token ids of one piece to out.
func (m *merger) encode(out []int, piece string) []int {
	if m.whole(piece) {
		return append(out, int(m.rank(piece)))
	}
	if len(piece) <= smallPiece {
		m.mergeSmall(piece, func(start, end int) { out = append(out, int(m.rank(piece[start:end]))) })
		return out
	}
	m.backtrack(piece, func(s *tokenStack) {
		s.each(func(t int32) { out = append(out, int(t)) })
	})
	return out
}

// backtrack runs the backtracking encoder on piece with pooled scratch and
// hands its tokens to use before the scratch goes back to the pool, cut down
// to the pooled sizes.
func (m *merger) backtrack(piece string, use func(*tokenStack)) {
	sc := m.pool.Get().(*scratch)
	live, ok := m.vocab.backtrack(piece, &sc.stack, sc.live, &sc.pairs)
	if !ok {
		// A byte that is not a token: only a vocabulary without all 256
		// bytes has one. Fall back to tiktoken's scan, which keeps it alone.
		sc.stack.n = 0
		m.mergeSmall(piece, func(start, end int) { sc.stack.push(m.rank(piece[start:end])) })
	}
	use(&sc.stack)
	sc.stack.n = 0
	if len(sc.stack.chunks) > poolStackChunks {
		clear(sc.stack.chunks[poolStackChunks:])
		sc.stack.chunks = sc.stack.chunks[:poolStackChunks:poolStackChunks]
	}
	sc.live = live[:0]
	if cap(sc.live) > poolBitsCap {
		sc.live = nil
	}
	m.pool.Put(sc)
}

// mergeSmall is tiktoken's own algorithm: rescan for the lowest-ranked pair
// each round, merge it (the leftmost of equal ranks), until none is left.
// It calls emit with the bounds of each token, in order. Pieces up to
// smallPiece bytes run in a buffer on the stack, a small one for the short
// pieces that are most of ordinary text, so as not to clear 1 KB each time.
func (m *merger) mergeSmall(piece string, emit func(start, end int)) {
	if len(piece) < 32 {
		var buf [32]part
		m.mergeParts(piece, buf[:0], emit)
		return
	}
	var buf [smallPiece + 1]part
	m.mergeParts(piece, buf[:0], emit)
}

func (m *merger) mergeParts(piece string, parts []part, emit func(start, end int)) {
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
}
