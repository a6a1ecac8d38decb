package tokens

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// mergeReference is tiktoken's merge (mergeSmall) on a piece of any length:
// quadratic, and the definition the backtracking encoder must equal.
func mergeReference(m *merger, piece string) []int32 {
	var out []int32
	if len(piece) <= smallPiece {
		m.mergeSmall(piece, func(start, end int) { out = append(out, m.rank(piece[start:end])) })
		return out
	}
	// mergeSmall's stack buffer only holds smallPiece parts; beyond that its
	// slice grows on the heap, with the same result.
	m.mergeSmall(piece, func(start, end int) { out = append(out, m.rank(piece[start:end])) })
	return out
}

func backtrackTokens(m *merger, piece string) []int32 {
	var out []int32
	m.backtrack(piece, func(s *tokenStack) { s.each(func(t int32) { out = append(out, t) }) })
	return out
}

// TestEveryTokenEncodesToItself checks the backtracking encoder's
// precondition on every token of both vocabularies: merging its bytes gives
// the token itself, and so does the backtracking encoder.
func TestEveryTokenEncodesToItself(t *testing.T) {
	for _, name := range byteLevelEncodings() {
		t.Run(name, func(t *testing.T) {
			enc, err := loadTestEncoding(t, name)
			if err != nil {
				t.Fatal(err)
			}
			v, bad := enc.merger.vocab, 0
			for r := int32(0); int(r) < len(v.nextPrefix); r++ {
				tok := v.token(r)
				if tok == "" {
					continue
				}
				want := []int32{r}
				got, ref := backtrackTokens(enc.merger, tok), mergeReference(enc.merger, tok)
				if !slices.Equal(got, want) || !slices.Equal(ref, want) {
					bad++
					if bad <= 5 {
						t.Errorf("token %d %q: backtracking %v, merging %v", r, tok, got, ref)
					}
				}
			}
		})
	}
}

// TestBacktrackMatchesMerge compares the backtracking encoder with tiktoken's
// merge on random concatenations of tokens (the texts on which BPE
// backtracks most) and on random bytes, as one piece each.
func TestBacktrackMatchesMerge(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, name := range byteLevelEncodings() {
		t.Run(name, func(t *testing.T) {
			enc, err := loadTestEncoding(t, name)
			if err != nil {
				t.Fatal(err)
			}
			m, v := enc.merger, enc.merger.vocab
			for i := range 300 {
				var b []byte
				size := 1 + rng.IntN(1500)
				for len(b) < size {
					switch i % 4 {
					case 0, 1: // random tokens
						r := int32(rng.IntN(len(v.nextPrefix)))
						b = append(b, v.token(r)...)
					case 2: // random bytes from a small alphabet
						b = append(b, " \nae\xc3\xa9"[rng.IntN(6)])
					default: // a token repeated, then another
						tok := v.token(int32(rng.IntN(len(v.nextPrefix))))
						for range rng.IntN(20) {
							b = append(b, tok...)
						}
					}
				}
				piece := string(b)
				if got, want := backtrackTokens(m, piece), mergeReference(m, piece); !slices.Equal(got, want) {
					t.Fatalf("%d bytes %q:\nbacktracking %v\nmerging      %v", len(piece), piece, got, want)
				}
			}
		})
	}
}

// TestPoolKeepsOnlySmallScratch counts a huge piece, then checks that no
// scratch in the pool holds more than the pooled sizes (64 KB of stack, 8 KB
// of bitfield), so a burst of huge requests leaves no memory behind.
func TestPoolKeepsOnlySmallScratch(t *testing.T) {
	enc, err := LoadEncoding(CL100KBase)
	if err != nil {
		t.Fatal(err)
	}
	if n := enc.Count(strings.Repeat("😀", 1<<20)); n == 0 {
		t.Fatal("no tokens")
	}
	var held []*scratch
	for range 4 {
		sc := enc.merger.pool.Get().(*scratch)
		held = append(held, sc)
		if len(sc.stack.chunks) > poolStackChunks || cap(sc.live) > poolBitsCap {
			t.Errorf("pooled scratch holds %d stack chunks and %d bitfield words; caps %d and %d",
				len(sc.stack.chunks), cap(sc.live), poolStackChunks, poolBitsCap)
		}
	}
	for _, sc := range held {
		enc.merger.pool.Put(sc)
	}
}

// byteLevelEncodings are the encodings of the byte-level BPE engine (all but
// Gemma 3's SentencePiece, which has no backtracking encoder).
func byteLevelEncodings() []string {
	return slices.DeleteFunc(slices.Clone(EncodingNames), func(n string) bool { return n == Gemma3 })
}
