package app

import (
	"bytes"
	"context"
	"time"

	"compress/gzip"
	"encoding/json"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"connectrpc.com/connect"
)

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// The transcoder's gzip reads at most one byte past its limit, then fails
// with ResourceExhausted.
func TestBoundedGzipStopsAtTheLimit(t *testing.T) {
	const limit = 1 << 20
	bomb := gzipped(t, bytes.Repeat([]byte("a"), 64<<20))
	d := newBoundedGzip(limit)()
	if err := d.Reset(bytes.NewReader(bomb)); err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, d)
	if connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("read %d bytes, error %v; want ResourceExhausted", n, err)
	}
	if n > limit+1 {
		t.Fatalf("read %d bytes past a %d-byte limit", n, limit)
	}
	// Under the limit everything comes through, and the reader is reusable.
	small := bytes.Repeat([]byte("b"), limit)
	if err := d.Reset(bytes.NewReader(gzipped(t, small))); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(d)
	if err != nil || !bytes.Equal(got, small) {
		t.Fatalf("%d bytes at the limit: %v", len(got), err)
	}
}

// A compressed Connect JSON request that inflates to 256 MB is refused as
// resource_exhausted without the server inflating it: the bytes allocated
// while it is served stay a small multiple of the message limit.
func TestConnectGzipBombIsRefused(t *testing.T) {
	api, _ := startHTTP(t, map[string]string{"CONTEXTD_MAX_MESSAGE_BYTES": "4194304", "CONTEXTD_MAX_COUNT_BYTES": "4194304"})
	body := gzipped(t, []byte(`{"text":"`+strings.Repeat("a", 256<<20)+`"}`))
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, api.base+"/contextd.v1.ContextService/CountTokens", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "gzip")
	if api.key != "" {
		req.Header.Set("Authorization", "Bearer "+api.key)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	resp, err := api.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	runtime.ReadMemStats(&after)
	var ce connectError
	if err := json.Unmarshal(out, &ce); err != nil || ce.Code != "resource_exhausted" {
		t.Fatalf("HTTP %d %s; want a resource_exhausted Connect error", resp.StatusCode, out)
	}
	// Unbounded, the server would allocate the 256 MB inflated body and more.
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Fatalf("serving the bomb allocated %d MB (answer %s)", grew>>20, out)
	}
	// Ordinary compressed requests still work.
	small := gzipped(t, []byte(`{"text":"hello world"}`))
	req2, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, api.base+"/contextd.v1.ContextService/CountTokens", bytes.NewReader(small))
	req2.Header.Set("Content-Type", "application/json")
	req2.Header.Set("Content-Encoding", "gzip")
	if api.key != "" {
		req2.Header.Set("Authorization", "Bearer "+api.key)
	}
	resp2, err := api.client.Do(req2)
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	b2, _ := io.ReadAll(resp2.Body)
	if resp2.StatusCode != http.StatusOK || !strings.Contains(string(b2), "totalTokens") {
		t.Fatalf("a small gzip request: HTTP %d %s", resp2.StatusCode, b2)
	}
}

// A call refused from its headers never reaches the interceptors; it is
// still logged and counted.
func TestRefusedCallsAreObserved(t *testing.T) {
	metricsAddr := freeAddr(t)
	var logs syncBuffer
	conn := startServerLog(t, map[string]string{"CONTEXTD_METRICS_ADDR": metricsAddr, "CONTEXTD_API_KEYS": "acme:k-acme"}, &logs)
	api := connectAPI{t: t, base: "http://" + conn.Target(), client: &http.Client{}}
	for range 2 {
		if code, _, out := api.post("ListSessions", `{}`); code != http.StatusUnauthorized {
			t.Fatalf("no key: HTTP %d %s", code, out)
		}
	}
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if want := `contextd_calls_refused_total{grpc_code="Unauthenticated",protocol="connect"} 2`; !strings.Contains(string(body), want) {
		t.Errorf("/metrics lacks %s", want)
	}
	if n := strings.Count(logs.String(), `"msg":"call refused before its body was read"`); n != 2 {
		t.Errorf("%d refusals logged, want 2:\n%s", n, logs.String())
	}
}

// A health Watch stream (served without credentials) does not hold up a
// graceful stop: it ends with unavailable as soon as shutdown begins.
func TestHealthWatchEndsOnShutdown(t *testing.T) {
	addr := freeAddr(t)
	cfg, err := ParseConfig([]string{"--listen-addr", addr, "--metrics-addr", "", "--data-dir", t.TempDir(),
		"--shutdown-timeout", "5m"}, mapEnv(map[string]string{"CONTEXTD_API_KEYS": "acme:k-acme"}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, discardLog()) }()
	waitListening(t, addr)
	watch := connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](
		http.DefaultClient, "http://"+addr+"/grpc.health.v1.Health/Watch", connect.WithProtoJSON())
	stream, err := watch.CallServerStream(t.Context(), connect.NewRequest(&healthpb.HealthCheckRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() {
		t.Fatal(stream.Err())
	}
	cancel()
	for stream.Receive() {
	}
	if connect.CodeOf(stream.Err()) != connect.CodeUnavailable {
		t.Fatalf("health watch ended with %v, want unavailable", stream.Err())
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("graceful stop waited for the health watch")
	}
}
