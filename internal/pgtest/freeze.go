package pgtest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Freezable puts a proxy between a client and the database of url, as
// RoundTrips does, and returns the URL to give the client and freeze:
// once called, the server's answers stop reaching the client (its
// statements still reach the server), as a network that went silent; the
// client's reads wait until their deadline, or until the test ends and
// the proxy closes.
func Freezable(t testing.TB, url string) (string, func()) {
	t.Helper()
	frozen := make(chan struct{})
	var once sync.Once
	proxied := proxy(t, url, func(client, server net.Conn, wg *sync.WaitGroup) {
		go func() { defer wg.Done(); _, _ = io.Copy(server, client); server.Close() }()
		go func() {
			defer wg.Done()
			defer client.Close()
			buf := make([]byte, 32<<10)
			for {
				n, err := server.Read(buf)
				select {
				case <-frozen:
					_, _ = io.Copy(io.Discard, server) // until the proxy closes
					return
				default:
				}
				if _, werr := client.Write(buf[:n]); werr != nil || err != nil {
					return
				}
			}
		}()
	})
	return proxied, func() { once.Do(func() { close(frozen) }) }
}
