package pgtest

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Link is a proxy between a client and the database (Faulty) whose
// faults a test switches on: Silence, then Sever.
type Link struct {
	// URL is the one to give the client.
	URL      string
	silenced atomic.Bool
	severed  atomic.Bool
	mu       sync.Mutex
	conns    []net.Conn
}

// Faulty puts a proxy between a client and the database of url, as
// RoundTrips does. Tests that a database gone away is told as
// store.ErrUnavailable, or that a silent one holds no answer, use it
// without stopping the cluster the package's other tests share.
func Faulty(t testing.TB, url string) *Link {
	t.Helper()
	l := &Link{}
	l.URL = proxy(t, url, func(client, server net.Conn, wg *sync.WaitGroup) {
		l.mu.Lock()
		if l.severed.Load() {
			client.Close()
			server.Close()
		} else {
			l.conns = append(l.conns, client, server)
		}
		l.mu.Unlock()
		go func() { defer wg.Done(); _, _ = io.Copy(server, client); server.Close() }()
		go func() {
			defer wg.Done()
			defer client.Close()
			buf := make([]byte, 32<<10)
			for {
				n, err := server.Read(buf)
				if l.silenced.Load() {
					_, _ = io.Copy(io.Discard, server) // until severed, or the proxy closes
					return
				}
				if _, werr := client.Write(buf[:n]); werr != nil || err != nil {
					return
				}
			}
		}()
	})
	return l
}

// Silence: from now the server's answers stop reaching the client (its
// statements still reach the server), as a network gone silent; the
// client's reads wait until their deadline, or Sever.
func (l *Link) Silence() { l.silenced.Store(true) }

// Sever: the database is gone for the client: its connections are cut
// and every new one is closed before its startup is answered, as a server
// that went away.
func (l *Link) Sever() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.severed.Store(true)
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}
