package gateway

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
)

// TestHexDigest: a stored digest decodes as encoding/hex decodes it, and
// anything else is not one.
func TestHexDigest(t *testing.T) {
	for _, s := range []string{
		strings.Repeat("0f", 32), strings.Repeat("A9", 32), strings.Repeat("0", 63), strings.Repeat("0g", 32), "",
	} {
		want, err := hex.DecodeString(s)
		d, ok := hexDigest(s)
		if ok != (err == nil && len(want) == 32) || ok && !bytes.Equal(d[:], want) {
			t.Errorf("%q: %x %v, encoding/hex %x %v", s, d, ok, want, err)
		}
	}
	s := strings.Repeat("ab", 32)
	if n := testing.AllocsPerRun(100, func() { hexDigest(s) }); n != 0 {
		t.Errorf("hexDigest allocates %v times", n)
	}
}
