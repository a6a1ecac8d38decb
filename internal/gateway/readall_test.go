package gateway

import (
	"bytes"
	"io"
	"testing"
	"testing/iotest"
)

// TestReadAllHoldsWhatArrived: a body is read whole whatever its size and
// however it arrives, and what its read holds follows the bytes that
// arrived, not the Content-Length the client announced.
func TestReadAllHoldsWhatArrived(t *testing.T) {
	for _, size := range []int{0, 1, 4096, preallocBytes - 1, preallocBytes, preallocBytes + 1, 3*preallocBytes + 17} {
		body := bytes.Repeat([]byte{'x'}, size)
		for name, r := range map[string]io.Reader{"whole": bytes.NewReader(body), "byte by byte": iotest.OneByteReader(bytes.NewReader(body))} {
			got, err := readAll(r, int64(size), 16<<20)
			if err != nil || !bytes.Equal(got, body) {
				t.Errorf("%d bytes %s: read %d bytes, %v", size, name, len(got), err)
			}
		}
	}
	// A client announces the limit and sends 100 bytes (then stalls: here
	// the stream ends).
	got, err := readAll(io.LimitReader(bytes.NewReader(make([]byte, 1000)), 100), 16<<20, 16<<20)
	if err != nil || len(got) != 100 {
		t.Fatalf("read %d bytes, %v", len(got), err)
	}
	if cap(got) > preallocBytes {
		t.Errorf("100 bytes of an announced 16 MB held a %d-byte buffer (at most %d)", cap(got), preallocBytes)
	}
}
