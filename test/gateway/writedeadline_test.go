package gateway_test

import (
	"fmt"
	"net"
	"testing"
	"time"
)

// TestSlowReaderIsCut: a client that stops reading a streamed answer is
// cut after CONTEXTD_STREAM_WRITE_TIMEOUT, and the upstream request is
// cancelled (the fake's endless stream ends). Before the fix the
// gateway's write blocked for ever once the socket buffers were full, and
// the provider's stream stayed open as long as the client's connection.
func TestSlowReaderIsCut(t *testing.T) {
	s := start(t, map[string]string{"CONTEXTD_STREAM_WRITE_TIMEOUT": "500ms"})
	s.fake.Endless = 64 << 10
	s.fake.Ended = make(chan int, 1)
	conn, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4096) // a client that reads nothing
	body := `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"Tell me everything."}]}`
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAuthorization: Bearer sk-test\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	start := time.Now()
	select {
	case n := <-s.fake.Ended:
		t.Logf("the upstream stream ended after %d deltas of 64 KiB, %v after the request", n, time.Since(start).Round(time.Millisecond))
	case <-time.After(20 * time.Second):
		t.Fatalf("a client that reads nothing still holds the upstream stream after 20 s")
	}
}
