// Package apptest runs contextd in-process for the tests outside
// internal/app (test/gateway, test/clients): app.Run on a free loopback
// port with embedded SQLite in a temporary directory (unless the
// environment names a database), no metrics port and no rate limit,
// stopped when the test ends.
package apptest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// Start runs contextd with env over those defaults and returns its
// address once its gateway answers (GET /v1/models: 200, or 401 when keys
// are required).
func Start(t testing.TB, env map[string]string) string {
	t.Helper()
	addr, stop := StartStoppable(t, env)
	t.Cleanup(stop)
	return addr
}

// StartStoppable is Start whose contextd stops when stop is called (a
// restart between two turns: stop, then start on the same
// CONTEXTD_DATA_DIR); stop fails t if Run failed, and is idempotent.
func StartStoppable(t testing.TB, env map[string]string) (addr string, stop func()) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = l.Addr().String()
	l.Close()
	all := map[string]string{
		"CONTEXTD_LISTEN_ADDR": addr, "CONTEXTD_DATA_DIR": t.TempDir(), "CONTEXTD_METRICS_ADDR": "",
		"CONTEXTD_RATE_LIMIT_RPS": "0",
	}
	for k, v := range env {
		all[k] = v
	}
	cfg, err := app.ParseConfig(nil, func(k string) (string, bool) { v, ok := all[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	// The server's log is kept and printed when the test fails: a
	// recording's failure is logged, never answered (gateway/record.go).
	logs := &syncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("contextd's log:\n%s", logs.String())
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctx, cfg, slog.New(slog.NewJSONHandler(logs, nil)))
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/v1/models")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized {
				return addr, stop
			}
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("contextd did not start: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Ledger sums the ledgers of the sessions ids of the contextd at addr
// (GetSession over Connect): the calls recorded and their usage, split as
// gatewaytest's fake provider bills it.
func Ledger(t testing.TB, addr string, ids ...string) (calls int64, bill gatewaytest.Bill) {
	t.Helper()
	all, _ := Ledgers(t, addr, ids...)
	return all.Calls, all.Bill
}

// LedgerSum is a sum of ledger rows: the calls and their usage.
type LedgerSum struct {
	Calls int64
	Bill  gatewaytest.Bill
}

// Ledgers is Ledger with the part of it that is estimated (Ledger.estimated:
// streams that ended before their usage), which all includes.
func Ledgers(t testing.TB, addr string, ids ...string) (all, estimated LedgerSum) {
	t.Helper()
	n := func(s string) int64 { v, _ := strconv.ParseInt(s, 10, 64); return v }
	type row struct {
		Calls            string `json:"calls"`
		InputTokens      string `json:"inputTokens"`
		CacheReadTokens  string `json:"cacheReadTokens"`
		CacheWriteTokens string `json:"cacheWriteTokens"`
		OutputTokens     string `json:"outputTokens"`
	}
	add := func(sum *LedgerSum, c row) {
		sum.Calls += n(c.Calls)
		sum.Bill.Uncached += n(c.InputTokens)
		sum.Bill.CacheRead += n(c.CacheReadTokens)
		sum.Bill.CacheWrite += n(c.CacheWriteTokens)
		sum.Bill.Output += n(c.OutputTokens)
	}
	for _, id := range ids {
		var got struct {
			Session struct {
				Ledger struct {
					Calls     row `json:"calls"`
					Estimated row `json:"estimated"`
				} `json:"ledger"`
			} `json:"session"`
		}
		b, _ := json.Marshal(map[string]any{"sessionId": id})
		resp, err := http.Post("http://"+addr+"/contextd.v1.ContextService/GetSession", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GetSession %s: %d %s", id, resp.StatusCode, body)
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("GetSession %s: %v: %s", id, err, body)
		}
		add(&all, got.Session.Ledger.Calls)
		add(&estimated, got.Session.Ledger.Estimated)
	}
	return all, estimated
}

// syncBuffer is a log's buffer written by the server's goroutines. It
// keeps the last of what was written, at most maxLogBytes and a line
// (a benchmark's millions of requests are not held).
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// maxLogBytes bounds the log a test keeps.
const maxLogBytes = 4 << 20

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len()+len(p) > maxLogBytes {
		rest := b.buf.Bytes()[b.buf.Len()/2:]
		b.buf = *bytes.NewBuffer(append([]byte("[earlier lines dropped]\n"), rest...))
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
