package tokens_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/tokens"
)

// testdataDir is the repository's testdata/ (golden counts and corpus).
func testdataDir(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "testdata")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("testdata/ is missing from the repository: %v", err)
	}
	return dir
}

type goldenLine struct {
	Kind   string `json:"kind"`
	Text   string `json:"text"`
	CL100K int    `json:"cl100k_base"`
	O200K  int    `json:"o200k_base"`
}

func readGolden(t testing.TB) []goldenLine {
	t.Helper()
	f, err := os.Open(filepath.Join(testdataDir(t), "golden", "token_counts.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []goldenLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var g goldenLine
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			t.Fatalf("golden line %d: %v", len(lines)+1, err)
		}
		lines = append(lines, g)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(lines) == 0 {
		t.Fatal("golden file is empty")
	}
	return lines
}

func mustLoad(t testing.TB, name string) *tokens.Encoding {
	t.Helper()
	enc, err := tokens.LoadEncoding(name)
	if err != nil {
		t.Fatal(err)
	}
	return enc
}

// TestGoldenCounts checks every line of OpenAI tiktoken's reference counts.
func TestGoldenCounts(t *testing.T) {
	lines := readGolden(t)
	for _, name := range tokens.OpenAIEncodings {
		t.Run(name, func(t *testing.T) {
			enc := mustLoad(t, name)
			mismatches := 0
			for i, g := range lines {
				want := g.CL100K
				if name == tokens.O200KBase {
					want = g.O200K
				}
				if got := enc.Count(g.Text); got != want {
					mismatches++
					if mismatches <= 10 {
						t.Errorf("line %d (%s, %d bytes): got %d tokens, want %d", i+1, g.Kind, len(g.Text), got, want)
					}
				}
			}
			if mismatches > 0 {
				t.Errorf("%d of %d lines mismatch", mismatches, len(lines))
			}
		})
	}
}

// TestGoldenRuns counts the long runs of one character of the golden file
// exactly and logs how long each took. Speed is asserted by ratio in
// TestWorkIsLinear and TestTimeIsLinear, and measured by BenchmarkRuns.
func TestGoldenRuns(t *testing.T) {
	lines := readGolden(t)
	for _, name := range tokens.OpenAIEncodings {
		enc := mustLoad(t, name)
		for i, g := range lines {
			if g.Kind != "run" {
				continue
			}
			start := time.Now()
			got := enc.Count(g.Text)
			elapsed := time.Since(start)
			want := g.CL100K
			if name == tokens.O200KBase {
				want = g.O200K
			}
			if got != want {
				t.Errorf("%s line %d: got %d, want %d", name, i+1, got, want)
			}
			t.Logf("%s line %d: %d bytes counted in %v", name, i+1, len(g.Text), elapsed)
		}
	}
}
