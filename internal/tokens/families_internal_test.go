package tokens

import (
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

var llama3ForTests struct {
	once sync.Once
	enc  *Encoding
	err  error
}

// loadTestEncoding loads any encoding for the package's internal tests. Llama
// 3's vocabulary is not embedded: it is imported once from the golden tool's
// npm package (CI runs npm ci first; locally the test is skipped without it,
// unless CONTEXTD_REQUIRE_NODE=1).
func loadTestEncoding(t testing.TB, name string) (*Encoding, error) {
	t.Helper()
	if name != Llama3 {
		return LoadEncoding(name)
	}
	_, file, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(file), "..", "..", "tools", "tokenizer-golden", "node_modules", "@lenml", "tokenizer-llama3_1", "models", "tokenizer.json")
	if _, err := os.Stat(src); err != nil {
		if os.Getenv("CONTEXTD_REQUIRE_NODE") == "1" {
			t.Fatalf("%s is required (npm ci in tools/tokenizer-golden): %v", src, err)
		}
		t.Skipf("llama3 vocabulary not installed (npm ci in tools/tokenizer-golden): %v", err)
	}
	l := &llama3ForTests
	l.once.Do(func() {
		dir, err := os.MkdirTemp("", "contextd-llama3-")
		if err != nil {
			l.err = err
			return
		}
		defer os.RemoveAll(dir)
		if _, l.err = ImportFile(Llama3, src, dir); l.err == nil {
			l.enc, l.err = LoadEncodingFrom(Llama3, dir)
		}
	})
	return l.enc, l.err
}
