package app

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// TestPprofOnMetricsListener reads /debug/pprof over the real metrics
// listener: on loopback by default (the index, a CPU profile that is a
// gzipped protobuf, a block profile), refused for a host name a rebound
// page would send (even with API keys, which leave /metrics unguarded), and
// absent when CONTEXTD_PPROF=off or when the metrics address is not
// loopback unless CONTEXTD_PPROF=on.
func TestPprofOnMetricsListener(t *testing.T) {
	get := func(t *testing.T, url, host string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		c := &http.Client{Timeout: 30 * time.Second}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}
	t.Run("loopback", func(t *testing.T) {
		addr := freeAddr(t)
		startServer(t, map[string]string{"CONTEXTD_METRICS_ADDR": addr})
		base := "http://" + addr
		if code, body := get(t, base+"/debug/pprof/", ""); code != http.StatusOK || !bytes.Contains(body, []byte("goroutine")) {
			t.Fatalf("index: %d %.200s", code, body)
		}
		if code, body := get(t, base+"/debug/pprof/profile?seconds=1", ""); code != http.StatusOK || !bytes.HasPrefix(body, []byte{0x1f, 0x8b}) {
			t.Errorf("CPU profile: %d, %d bytes, not gzip", code, len(body))
		}
		if code, body := get(t, base+"/debug/pprof/block?debug=1", ""); code != http.StatusOK || !bytes.Contains(body, []byte("cycles/second")) {
			t.Errorf("block profile: %d %.200s", code, body)
		}
		if code, body := get(t, base+"/debug/pprof/cmdline", ""); code != http.StatusNotFound || bytes.Contains(body, []byte(os.Args[0])) {
			t.Errorf("cmdline (flags may carry secrets): %d %.200s, want 404", code, body)
		}
		if code, _ := get(t, base+"/debug/pprof/", "attacker.example"); code != http.StatusForbidden {
			t.Errorf("rebound host: %d, want 403", code)
		}
		if code, _ := get(t, base+"/metrics", ""); code != http.StatusOK {
			t.Errorf("/metrics: %d", code)
		}
	})
	t.Run("keys", func(t *testing.T) {
		addr := freeAddr(t)
		startServer(t, map[string]string{"CONTEXTD_METRICS_ADDR": addr, "CONTEXTD_API_KEYS": "acme:secret-key-1"})
		if code, _ := get(t, "http://"+addr+"/debug/pprof/", "attacker.example"); code != http.StatusForbidden {
			t.Errorf("rebound host with keys: %d, want 403", code)
		}
		if code, _ := get(t, "http://"+addr+"/debug/pprof/", ""); code != http.StatusOK {
			t.Errorf("index with keys: %d", code)
		}
	})
	t.Run("off", func(t *testing.T) {
		addr := freeAddr(t)
		startServer(t, map[string]string{"CONTEXTD_METRICS_ADDR": addr, "CONTEXTD_PPROF": "off"})
		if code, _ := get(t, "http://"+addr+"/debug/pprof/", ""); code != http.StatusNotFound {
			t.Errorf("off: %d, want 404", code)
		}
	})
	for mode, want := range map[string]int{"loopback": http.StatusNotFound, "on": http.StatusOK} {
		t.Run("any-address-"+mode, func(t *testing.T) {
			free := freeAddr(t)
			port := free[strings.LastIndex(free, ":"):]
			startServer(t, map[string]string{"CONTEXTD_METRICS_ADDR": "0.0.0.0" + port, "CONTEXTD_PPROF": mode})
			if code, _ := get(t, "http://127.0.0.1"+port+"/debug/pprof/", ""); code != want {
				t.Errorf("metrics on 0.0.0.0, CONTEXTD_PPROF=%s: %d, want %d", mode, code, want)
			}
			if code, _ := get(t, "http://127.0.0.1"+port+"/metrics", ""); code != http.StatusOK {
				t.Errorf("/metrics: %d", code)
			}
		})
	}
	if _, err := ParseConfig([]string{"--pprof", "yes"}, mapEnv(map[string]string{})); err == nil || !strings.Contains(err.Error(), "CONTEXTD_PPROF") {
		t.Errorf("CONTEXTD_PPROF=yes: %v", err)
	}
}
