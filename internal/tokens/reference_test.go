package tokens_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	tiktoken "github.com/pkoukk/tiktoken-go"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"

	"github.com/contextd/contextd/internal/tokens"
)

// reference returns pkoukk/tiktoken-go for name, with its offline loader.
func reference(t testing.TB, name string) *tiktoken.Tiktoken {
	t.Helper()
	tiktoken.SetBpeLoader(tiktokenloader.NewOfflineLoader())
	ref, err := tiktoken.GetEncoding(name)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// corpusTexts returns every message text, tool argument and tool output of
// testdata/corpus/dev.
func corpusTexts(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testdataDir(t), "corpus", "dev", "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus transcripts: %v", err)
	}
	var texts []string
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var m struct {
				Content   string `json:"content"`
				ToolCalls []struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"tool_calls"`
			}
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			texts = append(texts, m.Content)
			for _, c := range m.ToolCalls {
				texts = append(texts, c.Name, c.Arguments)
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return texts
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestCorpusMatchesReference compares token ids, not only counts, with
// pkoukk/tiktoken-go on every text of the transcript corpus.
func TestCorpusMatchesReference(t *testing.T) {
	texts := corpusTexts(t)
	for _, name := range tokens.OpenAIEncodings {
		t.Run(name, func(t *testing.T) {
			enc, ref := mustLoad(t, name), reference(t, name)
			bad := 0
			for i, text := range texts {
				got, want := enc.Encode(text), ref.EncodeOrdinary(text)
				if !equalInts(got, want) {
					bad++
					if bad <= 5 {
						t.Errorf("text %d (%d bytes): %d tokens, reference %d", i, len(text), len(got), len(want))
					}
				}
				if n := enc.Count(text); n != len(got) {
					t.Errorf("text %d: Count %d != len(Encode) %d", i, n, len(got))
				}
			}
			t.Logf("%d texts, %d mismatches", len(texts), bad)
		})
	}
}

// FuzzMatchesReference is the differential fuzz test: our engine and
// pkoukk/tiktoken-go must produce the same tokens for any valid UTF-8 text.
// Its seed corpus runs with every `go test`.
func FuzzMatchesReference(f *testing.F) {
	seeds := []string{
		"", " ", "  ", "\n", " \n ", "\r\n\r\n", "hello world", "Hello, World!",
		"don't I'LL we'Re they'VE", "'s's's", "'ſ", "ſ", "x'ſ",
		"  leading and trailing  ", "tabs\tand\vvertical\fspaces",
		"1234567890 12 3", "٣٤٥ ٦", "Ⅻ ½", "a1b2c3",
		"func main() {\n\tfmt.Println(\"hi\")\n}\n", "// comment //\n/// slash", "a/b//c\n//",
		"{\"key\": [1, 2.5, true, null], \"nested\": {\"x\": \"y\"}}",
		"Ελληνικά κείμενα", "中文文本测试", "日本語のテキスト", "한국어 텍스트", "العربية", "हिन्दी",
		"e\u0301 cafe\u0301 \u0301 x\u0301\u0302", "ǅungla ǄUNGLA ǆ", "ABCdef DEFghi ghiJKL",
		"HTTPServer XMLHttpRequest iPhone", "\u00a0nbsp\u2003em\u3000ideo", "\u0085nel",
		"😀😃 emoji 👨‍👩‍👧", "\ufffd", "<|endoftext|> special", "   \n\n   \n  x",
		strings.Repeat(" ", 300), strings.Repeat("a", 300), strings.Repeat("ab", 200),
		strings.Repeat("\n", 200), strings.Repeat("1", 100), strings.Repeat("!", 300),
		strings.Repeat("中", 150), strings.Repeat("é", 150), strings.Repeat(" a", 200),
		// Pieces longer than 128 bytes go to the backtracking encoder.
		strings.Repeat(" ", 2000), strings.Repeat("a", 2000), strings.Repeat("\n", 2000),
		strings.Repeat("😀", 500), strings.Repeat("中", 700), strings.Repeat("ab", 1000),
		strings.Repeat("\t ", 700) + "x", strings.Repeat("!?", 600), strings.Repeat("Ǆa", 500),
		"supercalifragilisticexpialidocious" + strings.Repeat("antidisestablishmentarianism", 40),
		strings.Repeat("0123456789", 150), strings.Repeat("aaaaaaaaab", 150), strings.Repeat("é́", 400),
	}
	for _, s := range seeds {
		f.Add(s)
	}
	encs := map[string]*tokens.Encoding{}
	refs := map[string]*tiktoken.Tiktoken{}
	for _, name := range tokens.OpenAIEncodings {
		encs[name], refs[name] = mustLoad(f, name), reference(f, name)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if !utf8.ValidString(text) {
			t.Skip("protobuf strings are valid UTF-8")
		}
		for _, name := range tokens.OpenAIEncodings {
			got, want := encs[name].Encode(text), refs[name].EncodeOrdinary(text)
			if !equalInts(got, want) {
				t.Fatalf("%s %q: got %v, reference %v", name, text, got, want)
			}
			if n := encs[name].Count(text); n != len(want) {
				t.Fatalf("%s %q: Count %d, reference %d", name, text, n, len(want))
			}
		}
	})
}
