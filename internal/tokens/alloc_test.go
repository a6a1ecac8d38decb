package tokens_test

import (
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/tokens"
)

// TestCountAllocatesNothing backs docs/tokens.md's claim: counting ordinary text
// (the golden file's prose, code, JSON and multilingual texts) allocates
// nothing, and a long piece (a 60 KB run) reuses pooled scratch.
func TestCountAllocatesNothing(t *testing.T) {
	var texts []string
	for _, g := range readGolden(t) {
		if g.Kind != "run" && g.Kind != "random-mix" {
			texts = append(texts, g.Text)
		}
	}
	long := strings.Repeat("a", 60_000)
	encs := tokens.NewEncodings(importedDir(t))
	for _, name := range []string{tokens.CL100KBase, tokens.O200KBase, tokens.Gemma3} {
		enc, err := encs.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		enc.Count(long) // Gemma 3: fill its pools
		if allocs := testing.AllocsPerRun(5, func() {
			for _, text := range texts {
				enc.Count(text)
			}
		}); allocs != 0 {
			t.Errorf("%s: counting %d ordinary texts allocates %v times", name, len(texts), allocs)
		}
		if allocs := testing.AllocsPerRun(20, func() { enc.Count(long) }); allocs != 0 {
			t.Errorf("%s: counting a 60 KB piece allocates %v times per count", name, allocs)
		}
	}
}
