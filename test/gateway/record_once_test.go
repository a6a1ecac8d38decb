package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// TestExpandLoopUnreadAnswerRecordedOnce: the expand loop's final answer
// to a client that reads nothing (its write cut by
// CONTEXTD_STREAM_WRITE_TIMEOUT) still goes into the ledger once per
// upstream call: the five calls of the loop (three rounds, the stop note,
// the answer) are five calls in the ledger, not ten. Before the request
// path was stages (4c698e2) the loop recorded the answer before writing
// it and, the write failing, recorded its usages again.
func TestExpandLoopUnreadAnswerRecordedOnce(t *testing.T) {
	s := start(t, map[string]string{"CONTEXTD_STREAM_WRITE_TIMEOUT": "300ms"})
	a := newChatAgent(s, false)
	id := expandSetup(t, s, a, bigOutput())
	billed := s.fake.Billed()
	s.fake.Set(func(f *gatewaytest.Fake) { f.Expand = gatewaytest.ExpandForever })
	// An answer larger than the socket buffers hold (loopback's grow to
	// 4 MiB): the write blocks on a client that reads nothing.
	s.fake.Script(gatewaytest.Reply{Text: strings.Repeat("a", 16<<20)})
	a.user("Read it over and over.")
	body, err := json.Marshal(a.(*chatAgent).params)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4096) // a client that reads nothing
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAuthorization: Bearer sk-test\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	deadline := time.Now().Add(30 * time.Second)
	for s.fake.Billed() < billed+5 {
		if time.Now().After(deadline) {
			t.Fatalf("the fake billed %d calls of the loop, want 5", s.fake.Billed()-billed)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Read nothing for several times the write timeout: the gateway gives
	// up the write and closes the connection; then read what it sent.
	time.Sleep(2 * time.Second)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, _ := io.Copy(io.Discard, conn)
	if n >= 16<<20 {
		t.Fatalf("the client got the whole answer (%d bytes): the write was not cut", n)
	}
	// The recordings run after the handler; both of the old code's ran at
	// once, a few writes each.
	time.Sleep(500 * time.Millisecond)
	s.checkLedger(id)
}

// TestSlowReaderDoesNotHoldStrangers: a conversation whose client reads
// its large answer slowly (here: not at all, until the write timeout
// cuts it) does not make another conversation that starts the same way
// wait. The answer is recorded from just before its last byte goes out,
// not once the client has read it: until the recording ends, a request
// whose history the session's log begins waits for it (busy), and that
// recording must not wait on a stranger's client. Without the fix the
// second conversation waited for the first one's write to time out.
func TestSlowReaderDoesNotHoldStrangers(t *testing.T) {
	const timeout = 4 * time.Second
	s := start(t, map[string]string{"CONTEXTD_STREAM_WRITE_TIMEOUT": timeout.String()})
	s.fake.Script(gatewaytest.Reply{Text: strings.Repeat("a", 16<<20)}, gatewaytest.Reply{Text: "B's answer"})
	opening := []any{
		map[string]any{"role": "system", "content": "You are terse."},
		map[string]any{"role": "user", "content": "Tell me everything."},
	}
	body, _ := json.Marshal(map[string]any{"model": "gpt-4o", "messages": opening})
	conn, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4096) // a client that reads (almost) nothing
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAuthorization: Bearer sk-test\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	// The answer's first bytes: the gateway is writing it, and blocks.
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	var first [16]byte
	if _, err := io.ReadFull(conn, first[:]); err != nil || !strings.HasPrefix(string(first[:]), "HTTP/1.1 200") {
		t.Fatalf("the first answer: %q %v", first, err)
	}
	// Another conversation with the same opening, which then went its own
	// way: the first one's session is a candidate it checks.
	other := append(append([]any(nil), opening...),
		map[string]any{"role": "assistant", "content": "Everything, in short."},
		map[string]any{"role": "user", "content": "Go on."})
	began := time.Now()
	resp, raw := s.post("/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": other}, nil)
	took := time.Since(began)
	if resp.StatusCode != 200 || !strings.Contains(string(raw), "B's answer") {
		t.Fatalf("the other conversation: %d %s", resp.StatusCode, raw)
	}
	if took > timeout/2 {
		t.Errorf("the other conversation took %v: it waited for the first one's client (write timeout %v)", took.Round(time.Millisecond), timeout)
	}
	t.Logf("the other conversation took %v", took.Round(time.Millisecond))
}
