package tokens_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/contextd/contextd/internal/tokens"
)

// spReference is Hugging Face tokenizers' BPE for Gemma 3's tokenizer.json,
// written as plainly as possible and independently of the engine (its cuts,
// whole-word lookups, caches and merge trees): added tokens are matched
// leftmost-longest on the raw text; in between, spaces become "▁", each
// character is a symbol (or, when the vocabulary lacks it, each of its
// UTF-8 bytes a <0xXX> symbol), and the adjacent pair with the lowest merge
// rank — the leftmost of equals — is merged until no pair is in the merge
// list.
type spReference struct {
	vocab   map[string]int
	ranks   map[[2]string]int
	added   map[string]int
	lengths []int // of the added tokens, longest first
}

func loadSPReference(t testing.TB) *spReference {
	t.Helper()
	raw, err := os.ReadFile(referenceTokenizer(t, "gemma3"))
	if err != nil {
		t.Fatal(err)
	}
	var tj struct {
		AddedTokens []struct {
			ID      int    `json:"id"`
			Content string `json:"content"`
		} `json:"added_tokens"`
		Model struct {
			Vocab  map[string]int `json:"vocab"`
			Merges [][2]string    `json:"merges"`
		} `json:"model"`
	}
	if err := json.Unmarshal(raw, &tj); err != nil {
		t.Fatal(err)
	}
	ref := &spReference{vocab: tj.Model.Vocab, ranks: make(map[[2]string]int, len(tj.Model.Merges)), added: map[string]int{}}
	for rank, mg := range tj.Model.Merges {
		ref.ranks[mg] = rank // a pair listed twice keeps its last rank
	}
	for _, a := range tj.AddedTokens {
		ref.added[a.Content] = a.ID
		if !slices.Contains(ref.lengths, len(a.Content)) {
			ref.lengths = append(ref.lengths, len(a.Content))
		}
	}
	slices.Sort(ref.lengths)
	slices.Reverse(ref.lengths)
	return ref
}

func (ref *spReference) encode(text string) []int {
	var out []int
	start := 0
	for i := 0; i < len(text); {
		best := ""
		for _, l := range ref.lengths {
			if _, ok := ref.added[text[i:min(len(text), i+l)]]; ok && i+l <= len(text) {
				best = text[i : i+l]
				break
			}
		}
		if best == "" {
			i++
			continue
		}
		out = ref.merge(out, text[start:i])
		out = append(out, ref.added[best])
		i += len(best)
		start = i
	}
	return ref.merge(out, text[start:])
}

func (ref *spReference) merge(out []int, text string) []int {
	var syms []string
	for _, r := range strings.ReplaceAll(text, " ", "▁") {
		if _, ok := ref.vocab[string(r)]; ok {
			syms = append(syms, string(r))
			continue
		}
		for _, b := range []byte(string(r)) {
			syms = append(syms, fmt.Sprintf("<0x%02X>", b))
		}
	}
	rank := func(k int) int {
		if r, ok := ref.ranks[[2]string{syms[k], syms[k+1]}]; ok {
			return r
		}
		return -1
	}
	ranks := make([]int, max(len(syms)-1, 0))
	for k := range ranks {
		ranks[k] = rank(k)
	}
	for {
		best := -1
		for k, r := range ranks {
			if r >= 0 && (best < 0 || r < ranks[best]) {
				best = k
			}
		}
		if best < 0 {
			break
		}
		syms[best] += syms[best+1]
		syms = slices.Delete(syms, best+1, best+2)
		ranks = slices.Delete(ranks, best, best+1)
		if best < len(ranks) {
			ranks[best] = rank(best)
		}
		if best > 0 {
			ranks[best-1] = rank(best - 1)
		}
	}
	for _, s := range syms {
		out = append(out, ref.vocab[s])
	}
	return out
}

// spTestTexts returns adversarial texts for Gemma 3: concatenations of the
// vocabulary's own pieces (with "▁" as a space or kept), random Unicode
// (controls, combining marks, CJK, emoji, private use, "▁" itself) in runs,
// random JSON, and windows of the golden texts; short ones and, joined,
// long ones (which take the word cache and the merge tree).
func spTestTexts(t testing.TB, ref *spReference, short, long int) []string {
	rng := rand.New(rand.NewPCG(15, 2026))
	var pieces []string
	for p := range ref.vocab {
		if _, added := ref.added[p]; !added {
			pieces = append(pieces, p)
		}
	}
	slices.Sort(pieces)
	var golden strings.Builder
	for _, g := range readGolden(t) {
		if g.Kind != "random-mix" {
			golden.WriteString(g.Text)
		}
	}
	corpus := golden.String()
	ranges := [][2]rune{{0, 0x1f}, {' ', '~'}, {' ', '~'}, {0x7f, 0xff}, {0x300, 0x36f}, {0x400, 0x4ff}, {0x600, 0x6ff},
		{0x900, 0x97f}, {0x2580, 0x2582}, {0x3040, 0x30ff}, {0x4e00, 0x9fff}, {0xac00, 0xd7a3}, {0xe000, 0xe0ff},
		{0x1f300, 0x1faff}, {0x10000, 0x10fff}, {0xfff0, 0xffff}}
	randRune := func() rune {
		rg := ranges[rng.IntN(len(ranges))]
		for {
			r := rg[0] + rune(rng.IntN(int(rg[1]-rg[0]+1)))
			if utf8.ValidRune(r) {
				return r
			}
		}
	}
	var jsonValue func(depth int) any
	jsonValue = func(depth int) any {
		switch k := rng.IntN(7); {
		case k == 0 && depth < 3:
			m := map[string]any{}
			for range rng.IntN(5) {
				m[pieces[rng.IntN(len(pieces))]] = jsonValue(depth + 1)
			}
			return m
		case k == 1 && depth < 3:
			var a []any
			for range rng.IntN(5) {
				a = append(a, jsonValue(depth+1))
			}
			return a
		case k == 2:
			return rng.IntN(100000) - 500
		case k == 3:
			return rng.Float64() * 1000
		case k == 4:
			return rng.IntN(2) == 0
		}
		return pieces[rng.IntN(len(pieces))] + fmt.Sprintf("call_%x", rng.Uint32())
	}
	one := func() string {
		var b strings.Builder
		switch rng.IntN(5) {
		case 0, 1:
			for range 1 + rng.IntN(30) {
				p := pieces[rng.IntN(len(pieces))]
				if rng.IntN(2) == 0 {
					p = strings.ReplaceAll(p, "▁", " ")
				}
				b.WriteString(p)
				if rng.IntN(8) == 0 {
					b.WriteRune(randRune())
				}
			}
		case 2:
			for range 1 + rng.IntN(40) {
				r := randRune()
				for range 1 + rng.IntN(4)*rng.IntN(20) {
					b.WriteRune(r)
				}
			}
		case 3:
			var v []byte
			if rng.IntN(2) == 0 {
				v, _ = json.Marshal(jsonValue(0))
			} else {
				v, _ = json.MarshalIndent(jsonValue(0), "", "  ")
			}
			b.Write(v)
		default:
			i := rng.IntN(len(corpus))
			j := min(len(corpus), i+1+rng.IntN(400))
			b.WriteString(strings.ToValidUTF8(corpus[i:j], ""))
		}
		return b.String()
	}
	var texts []string
	for range short {
		texts = append(texts, one())
	}
	for range long {
		var b strings.Builder
		for b.Len() < 4500+rng.IntN(4000) {
			b.WriteString(texts[rng.IntN(len(texts))])
			if rng.IntN(3) == 0 {
				b.WriteString(one())
			}
		}
		texts = append(texts, b.String())
	}
	return texts
}

// TestSentencePieceMatchesReference: the engine (cutting the text into
// words between characters no token holds side by side, looking words up
// whole, caching them, merging on the stack or with a tree) yields the
// same token ids as the plain reference merge of the whole text, on
// adversarial texts the golden set does not have.
func TestSentencePieceMatchesReference(t *testing.T) {
	ref := loadSPReference(t)
	enc, err := tokens.NewEncodings(importedDir(t)).Get(tokens.Gemma3)
	if err != nil {
		t.Fatal(err)
	}
	texts := spTestTexts(t, ref, 3000, 8)
	// Runs without a cut longer than the stack merge takes.
	texts = append(texts, strings.Repeat("a", 3000), strings.Repeat("😀", 700), strings.Repeat("中文", 400),
		strings.Repeat(`{"a":[1,2],"b":"c"}`, 200), strings.Repeat("▁ ", 500))
	mismatches := 0
	for _, text := range texts {
		got, want := enc.Encode(text), ref.encode(text)
		if !slices.Equal(got, want) {
			mismatches++
			if mismatches <= 5 {
				t.Errorf("%q (%d bytes): got %d tokens %v, reference %d tokens %v", text[:min(len(text), 200)], len(text), len(got), got[:min(len(got), 40)], len(want), want[:min(len(want), 40)])
			}
			continue
		}
		if n := enc.Count(text); n != len(want) {
			t.Errorf("%q: Count %d, reference %d tokens", text[:min(len(text), 200)], n, len(want))
		}
	}
	if mismatches > 0 {
		t.Errorf("%d of %d texts differ from the reference merge", mismatches, len(texts))
	}
}

// TestSentencePieceCutsJSON backs docs/performance.md: Gemma 3's words in the golden
// JSON texts (compact ones are a single 100-character word if cut only
// before "▁") are at most 6 characters, and in the golden code at most 66.
func TestSentencePieceCutsJSON(t *testing.T) {
	enc, err := tokens.NewEncodings(importedDir(t)).Get(tokens.Gemma3)
	if err != nil {
		t.Fatal(err)
	}
	longest := map[string]int{}
	for _, g := range readGolden(t) {
		kind := g.Kind
		if strings.HasPrefix(kind, "file:code") {
			kind = "code"
		}
		for _, w := range enc.Split(g.Text) {
			longest[kind] = max(longest[kind], utf8.RuneCountInString(w))
		}
	}
	t.Logf("longest word by kind: %v", longest)
	if longest["json"] > 6 || longest["code"] > 66 {
		t.Errorf("longest JSON word %d characters (want ≤ 6), code %d (want ≤ 66)", longest["json"], longest["code"])
	}
}
