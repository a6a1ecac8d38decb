package gateway

import (
	"bytes"
	"crypto/sha256"
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

// BenchmarkHexDigest: 1,000 stored digests decoded (what build does for
// a view of 1,000 messages on every request).
func BenchmarkHexDigest(b *testing.B) {
	var ss []string
	for i := range 1000 {
		d := sha256.Sum256([]byte{byte(i), byte(i >> 8)})
		ss = append(ss, hex.EncodeToString(d[:]))
	}
	var sink byte
	for b.Loop() {
		for _, s := range ss {
			d, _ := hexDigest(s)
			sink ^= d[0] ^ d[31]
		}
	}
	_ = sink
}
