package tokens

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// linearInputs are the texts whose cost must grow linearly: long runs of one
// character (each one giant piece for the pre-tokenizer), a giant piece of
// random letters (where BPE backtracks), and a random mix of everything.
var linearInputs = []struct {
	name string
	make func(size int) string
}{
	{"spaces", repeat(" ")},
	{"a", repeat("a")},
	{"newlines", repeat("\n")},
	{"emoji", repeat("😀")},
	{"letters", func(size int) string { return randomText(size, "abcdefghijklmnopqrstuvwxyzéàAEZ") }},
	{"mixed", func(size int) string {
		return randomText(size, "ab c\n\n  \t1234!!..//😀中é'sAZ")
	}},
}

func repeat(unit string) func(int) string {
	return func(size int) string { return strings.Repeat(unit, size/len(unit)) }
}

// randomText returns size bytes (rounded down to whole runes) of runes drawn
// from alphabet with a fixed seed, in runs of 1 to 40, so that long pieces
// of every kind occur.
func randomText(size int, alphabet string) string {
	runes := []rune(alphabet)
	rng := rand.New(rand.NewPCG(7, uint64(size)))
	var b strings.Builder
	for b.Len() < size {
		r := runes[rng.IntN(len(runes))]
		for range 1 + rng.IntN(40) {
			if b.Len()+len(string(r)) > size {
				return b.String()
			}
			b.WriteRune(r)
		}
	}
	return b.String()
}

// work counts the tokens of text and the work the BPE engine did: the
// candidate tokens the backtracking encoder tried, each of which costs at
// most a constant set by the vocabulary (a trie walk of at most its longest
// token, a pair check of at most the depth of its merge tree), plus the
// bytes of the short pieces, whose merge is bounded per byte.
func work(e *Encoding, text string) (tokens, steps int) {
	if e.sp != nil {
		// SentencePiece: a bounded cost per character (a word of up to
		// spSmall characters is merged on the stack) plus the heap
		// operations of longer words, each O(log n).
		var s spSink
		e.sp.run(text, &s)
		return s.n, len(text) + s.steps
	}
	for i := 0; i < len(text); {
		j := e.piece(text, i)
		piece := text[i:j]
		if len(piece) <= smallPiece || e.merger.whole(piece) {
			tokens += e.merger.count(piece)
			steps += len(piece)
		} else {
			e.merger.backtrack(piece, func(s *tokenStack) { tokens, steps = tokens+s.n, steps+s.tries })
		}
		i = j
	}
	return tokens, steps
}

// TestWorkIsLinear asserts, deterministically, that 1 MB costs the BPE
// engine at most 10× the work of 100 KB on every adversarial input (a
// quadratic engine would do 100×, an n log n one 12×). The 1 MB text is the
// 100 KB one ten times, so the ratio is exact but for the seams, where pieces
// join; 10.1 allows for them.
func TestWorkIsLinear(t *testing.T) {
	for _, name := range EncodingNames {
		enc, err := loadTestEncoding(t, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range linearInputs {
			small := in.make(100_000)
			big := strings.Repeat(small, 10)
			n1, w1 := work(enc, small)
			n2, w2 := work(enc, big)
			if want := enc.Count(small); n1 != want || n2 < 10*want-10 || n2 > 10*want+10 {
				t.Fatalf("%s %s: work counted %d and %d tokens, Count of 100 KB %d", name, in.name, n1, n2, want)
			}
			ratio := float64(w2) / float64(w1)
			t.Logf("%s %s: 100 KB %d steps, 1 MB %d steps, ratio %.3f", name, in.name, w1, w2, ratio)
			if ratio > 10.1 {
				t.Errorf("%s %s: 1 MB costs %.2f× the work of 100 KB, want ≤ 10×", name, in.name, ratio)
			}
		}
	}
}
