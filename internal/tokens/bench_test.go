package tokens_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/tokens"
)

// benchInputs groups the golden file's texts by kind into one input each.
func benchInputs(b *testing.B) map[string]string {
	b.Helper()
	byKind := map[string]*strings.Builder{}
	for _, g := range readGolden(b) {
		kind := g.Kind
		switch {
		case strings.HasPrefix(kind, "file:prose"):
			kind = "prose"
		case strings.HasPrefix(kind, "file:code"):
			kind = "code"
		case kind == "json", kind == "multilingual":
		default:
			continue
		}
		if byKind[kind] == nil {
			byKind[kind] = &strings.Builder{}
		}
		byKind[kind].WriteString(g.Text)
		byKind[kind].WriteString("\n")
	}
	out := map[string]string{}
	for k, v := range byKind {
		out[k] = v.String()
	}
	return out
}

// BenchmarkCount compares our engine with pkoukk/tiktoken-go on the same
// inputs in the same run. MB/s is the figure to read.
func BenchmarkCount(b *testing.B) {
	inputs := benchInputs(b)
	for _, name := range tokens.OpenAIEncodings {
		enc, ref := mustLoad(b, name), reference(b, name)
		for _, kind := range []string{"prose", "code", "json", "multilingual"} {
			text := inputs[kind]
			b.Run(fmt.Sprintf("%s/%s/contextd", name, kind), func(b *testing.B) {
				b.SetBytes(int64(len(text)))
				b.ReportAllocs()
				for b.Loop() {
					enc.Count(text)
				}
			})
			b.Run(fmt.Sprintf("%s/%s/pkoukk", name, kind), func(b *testing.B) {
				b.SetBytes(int64(len(text)))
				for b.Loop() {
					_ = len(ref.EncodeOrdinary(text))
				}
			})
		}
	}
}

// BenchmarkRuns counts long runs of one character, each one giant piece for
// the pre-tokenizer. Flat MB/s across lengths means linear time; the 8 MB
// runs are the largest text CountTokens accepts by default.
// pkoukk/tiktoken-go is run at the shortest length only, because it is
// quadratic (100 KB of spaces takes it about 11 s).
func BenchmarkRuns(b *testing.B) {
	for _, name := range tokens.OpenAIEncodings {
		enc, ref := mustLoad(b, name), reference(b, name)
		for _, ch := range []string{" ", "a", "7", "\n", "中", "😀"} {
			for _, size := range []int{10_000, 100_000, 1_000_000, 8 << 20} {
				text := strings.Repeat(ch, size/len(ch))
				label := fmt.Sprintf("%dKB", size/1000)
				if size == 8<<20 {
					label = "8MB"
				}
				b.Run(fmt.Sprintf("%s/%q/%s/contextd", name, ch, label), func(b *testing.B) {
					b.SetBytes(int64(len(text)))
					b.ReportAllocs()
					for b.Loop() {
						enc.Count(text)
					}
				})
				if size == 10_000 {
					b.Run(fmt.Sprintf("%s/%q/%s/pkoukk", name, ch, label), func(b *testing.B) {
						b.SetBytes(int64(len(text)))
						for b.Loop() {
							_ = len(ref.EncodeOrdinary(text))
						}
					})
				}
			}
		}
	}
}
