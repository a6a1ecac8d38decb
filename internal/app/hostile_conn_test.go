package app

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
)

// TestHostileIdleConnections: a client that opens connections and leaves
// them idle (HTTP/1.1 keep-alive after a request, or HTTP/2 with only its
// preface) has them closed after CONTEXTD_HTTP_IDLE_TIMEOUT; they lived
// until the maximum connection age (30 minutes). On both stores.
func TestHostileIdleConnections(t *testing.T) {
	onBothStoresEnv(t, map[string]string{"CONTEXTD_HTTP_IDLE_TIMEOUT": "300ms"}, func(t *testing.T, env map[string]string) {
		addr := startServer(t, env).Target()
		closedWithin := func(t *testing.T, c net.Conn, r io.Reader) {
			t.Helper()
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err := io.Copy(io.Discard, r)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal("the idle connection is still open after 5 s")
			}
		}
		t.Run("HTTP/1.1 keep-alive", func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, "GET /ui/ HTTP/1.1\r\nHost: localhost\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			closedWithin(t, c, br)
		})
		t.Run("h2c preface only", func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// The connection preface and an empty SETTINGS frame.
			if _, err := io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"); err != nil {
				t.Fatal(err)
			}
			closedWithin(t, c, c)
		})
	})
}
