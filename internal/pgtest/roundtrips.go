package pgtest

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// RoundTrips puts a proxy between a client and the database of url and
// returns the URL to give the client and a counter of the round trips the
// client's connections made through it so far: each Sync of the extended
// protocol (the end of a query, or of a pipelined batch of them) and each
// simple Query is one wait for the server. The proxy stops when the test
// ends.
func RoundTrips(t testing.TB, url string) (string, func() int64) {
	t.Helper()
	var n atomic.Int64
	proxied := proxy(t, url, func(client, server net.Conn, wg *sync.WaitGroup) {
		go func() { defer wg.Done(); _, _ = io.Copy(client, server); client.Close() }()
		go func() { defer wg.Done(); _ = countFrontend(server, client, &n); server.Close() }()
	})
	return proxied, n.Load
}

// proxy listens on a loopback port for the database of url and, for each
// connection a client makes to it, dials the database and hands both ends
// to relay, which starts two goroutines (wg counts them: wg.Add(2) is
// done) that copy between them. The proxy and its connections are closed
// when the test ends. It returns the URL to give the client.
func proxy(t testing.TB, url string, relay func(client, server net.Conn, wg *sync.WaitGroup)) string {
	t.Helper()
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	network, addr := "tcp", net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port))
	if strings.HasPrefix(cfg.Host, "/") {
		network, addr = "unix", fmt.Sprintf("%s/.s.PGSQL.%d", cfg.Host, cfg.Port)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial(network, addr)
			if err != nil {
				client.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, client, server)
			mu.Unlock()
			wg.Add(2)
			relay(client, server, &wg)
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	proxied := fmt.Sprintf("host=127.0.0.1 port=%d user=%s dbname=%s sslmode=disable", port, cfg.User, cfg.Database)
	if cfg.Password != "" {
		proxied += " password=" + cfg.Password
	}
	return proxied
}

// countFrontend copies a client's messages to the server, counting its
// Syncs and simple Queries in n. The startup phase's messages (an SSL or
// GSS request, the startup message) carry no type byte; every message
// after the startup message does.
func countFrontend(server io.Writer, client io.Reader, n *atomic.Int64) error {
	r := bufio.NewReader(client)
	head := make([]byte, 8)
	for {
		if _, err := io.ReadFull(r, head); err != nil {
			return err
		}
		size := int64(binary.BigEndian.Uint32(head[:4]))
		code := binary.BigEndian.Uint32(head[4:8])
		if _, err := server.Write(head); err != nil {
			return err
		}
		if _, err := io.CopyN(server, r, size-8); err != nil {
			return err
		}
		if code != 80877103 && code != 80877104 { // not SSLRequest, GSSENCRequest: the startup message
			break
		}
	}
	for {
		if _, err := io.ReadFull(r, head[:5]); err != nil {
			return err
		}
		if head[0] == 'S' || head[0] == 'Q' {
			n.Add(1)
		}
		if _, err := server.Write(head[:5]); err != nil {
			return err
		}
		if _, err := io.CopyN(server, r, int64(binary.BigEndian.Uint32(head[1:5]))-4); err != nil {
			return err
		}
	}
}
