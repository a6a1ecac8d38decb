package store

import (
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
)

// TestToolsCodecBounded: the codec's texts stay within toolsCacheBytes
// whatever a session's tools weigh — a tools list larger than the bound
// (CONTEXTD_MAX_COUNT_BYTES lets through 8 MB of tools, which JSON's
// escapes make up to six times longer) is encoded and decoded as it is,
// not kept.
func TestToolsCodecBounded(t *testing.T) {
	big := []chat.Tool{{Name: "big", Description: strings.Repeat("<", toolsCacheBytes/4)}} // \u003c: 6 bytes a '<'
	text, err := encodeTools(big)
	if err != nil {
		t.Fatal(err)
	}
	if len(text) <= toolsCacheBytes {
		t.Fatalf("the test's text is %d bytes, not past the bound", len(text))
	}
	check := func(step string) {
		t.Helper()
		toolsCache.mu.Lock()
		defer toolsCache.mu.Unlock()
		if toolsCache.bytes > toolsCacheBytes {
			t.Fatalf("%s: the codec keeps %d bytes of texts, past its bound of %d", step, toolsCache.bytes, toolsCacheBytes)
		}
	}
	check("encoded")
	got, err := decodeTools(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != big[0] {
		t.Fatal("the large tools decode to something else")
	}
	check("decoded")
}
