package tokens

import (
	"fmt"
	"strings"
	"testing"
)

// tinySPFile is a SentencePiece vocabulary of a few tokens: <pad>, the 256
// byte-fallback tokens, then extra pieces with merges between them.
func tinySPFile(extra []string, merges [][2]string) spFile {
	f := spFile{pieces: []string{"<pad>"}, added: map[string]int32{}}
	for b := range 256 {
		f.pieces = append(f.pieces, fmt.Sprintf("<0x%02X>", b))
	}
	f.pieces = append(f.pieces, extra...)
	id := func(p string) int32 {
		for i, q := range f.pieces {
			if q == p {
				return int32(i)
			}
		}
		panic(p)
	}
	for _, mg := range merges {
		f.merges = append(f.merges, [2]int32{id(mg[0]), id(mg[1])})
	}
	return f
}

// TestSPModelRefusesByteMerges: the engine keeps an unknown character one
// symbol that never merges, which is exact only when no merge joins a
// byte-fallback token; a vocabulary with such a merge is refused.
func TestSPModelRefusesByteMerges(t *testing.T) {
	ok := tinySPFile([]string{"a", "b", "ab", "▁", "▁ab"}, [][2]string{{"a", "b"}, {"▁", "ab"}})
	m, err := newSPModel(ok)
	if err != nil {
		t.Fatal(err)
	}
	var s spSink
	s.encode = true
	m.run("ab abé", &s) // é is unknown: its two bytes
	if got := fmt.Sprint(s.ids); got != "[259 261 196 170]" {
		t.Errorf("tiny vocabulary: ids %s, want [259 261 196 170]", got)
	}
	bad := tinySPFile([]string{"a", "<0xC3><0xA9>"}, [][2]string{{"<0xC3>", "<0xA9>"}})
	if _, err := newSPModel(bad); err == nil || !strings.Contains(err.Error(), "byte-fallback") {
		t.Errorf("a merge of byte-fallback tokens: %v, want refused", err)
	}
}
