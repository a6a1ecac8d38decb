package pgtest

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Severable puts a proxy between a client and the database of url, as
// RoundTrips does, and returns the URL to give the client and sever: once
// called, the database is gone for the client: its connections are cut and
// every new one is closed before its startup is answered, as a server that
// went away. Tests that a lost database is told as store.ErrUnavailable use
// it without stopping the cluster the package's other tests share.
func Severable(t testing.TB, url string) (string, func()) {
	t.Helper()
	var severed atomic.Bool
	var mu sync.Mutex
	var conns []net.Conn
	proxied := proxy(t, url, func(client, server net.Conn, wg *sync.WaitGroup) {
		mu.Lock()
		if severed.Load() {
			client.Close()
			server.Close()
		} else {
			conns = append(conns, client, server)
		}
		mu.Unlock()
		go func() { defer wg.Done(); _, _ = io.Copy(server, client); server.Close() }()
		go func() { defer wg.Done(); _, _ = io.Copy(client, server); client.Close() }()
	})
	return proxied, func() {
		mu.Lock()
		defer mu.Unlock()
		severed.Store(true)
		for _, c := range conns {
			c.Close()
		}
		conns = nil
	}
}
