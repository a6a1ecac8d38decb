package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
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

// TestSlowSteadyReaderIsNotCut: a large answer (16 MiB, more than the
// socket buffers hold) read steadily by a client on a slower link takes
// longer than CONTEXTD_STREAM_WRITE_TIMEOUT in all, and arrives whole:
// the deadline covers each piece of the answer, not the whole of it. (A
// piece waits until the kernel frees room in the socket's send buffer,
// about half of it; on loopback that buffer grows to 4 MiB, hence the
// rates here.) Before the fix the answer went out as one write under one
// deadline and the client got a truncated body.
func TestSlowSteadyReaderIsNotCut(t *testing.T) {
	s := start(t, map[string]string{"CONTEXTD_STREAM_WRITE_TIMEOUT": "1s"})
	s.fake.Script(gatewaytest.Reply{Text: strings.Repeat("a", 16<<20)})
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err == nil {
				_ = c.(*net.TCPConn).SetReadBuffer(64 << 10) // a slow link
			}
			return c, err
		}}}
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"Tell me everything."}]}`
	req, _ := http.NewRequest("POST", s.url("/v1/chat/completions"), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-test")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	start := time.Now()
	buf := make([]byte, 32<<10)
	n := 0
	for {
		m, err := resp.Body.Read(buf)
		n += m
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %d bytes in %v: %v", n, time.Since(start).Round(time.Millisecond), err)
		}
		time.Sleep(5 * time.Millisecond) // at most about 6 MB/s
	}
	if resp.StatusCode != http.StatusOK || n < 16<<20 {
		t.Fatalf("%d, %d bytes", resp.StatusCode, n)
	}
	t.Logf("%d bytes in %v", n, time.Since(start).Round(time.Millisecond))
}

// TestPipelinedNonReaderIsCut: a client that pipelines requests and
// reads no answer is cut too when the answers are small (each one
// buffered until the handler returns). Before the fix the gateway's
// deadline was cleared when the handler returned and net/http then
// flushed the answer with none: the connection hung, its goroutine held,
// for as long as the client kept it open.
func TestPipelinedNonReaderIsCut(t *testing.T) {
	s := start(t, map[string]string{"CONTEXTD_STREAM_WRITE_TIMEOUT": "300ms"})
	conn, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	const n = 20000
	go func() {
		w := bufio.NewWriter(conn)
		for range n {
			if _, err := io.WriteString(w, "TRACE /v1/x HTTP/1.1\r\nHost: localhost\r\n\r\n"); err != nil {
				return
			}
		}
		_ = w.Flush()
	}()
	time.Sleep(3 * time.Second) // read nothing for ten times the timeout
	reading := time.Now()
	_ = conn.SetReadDeadline(reading.Add(10 * time.Second))
	br := bufio.NewReader(conn)
	got := 0
	var end error
	for got < n {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			end = err
			break
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		got++
	}
	if end == nil || time.Since(reading) > 8*time.Second {
		t.Errorf("after %d of %d answers: %v; want the connection closed by the gateway, not hanging", got, n, end)
	}
	t.Logf("%d of %d answers before the cut (%v)", got, n, end)
}
