package gateway

import (
	"net/http"
	"testing"
)

// TestConnectionNamedHeadersDropped: the headers a Connection header names
// are hop-by-hop and go no further, in either direction (as
// httputil.ReverseProxy drops them); before the fix only the fixed list
// was dropped.
func TestConnectionNamedHeadersDropped(t *testing.T) {
	src := http.Header{
		"Connection":     {"keep-alive, X-Hop", " x-other-hop "},
		"X-Hop":          {"1"},
		"X-Other-Hop":    {"2"},
		"Authorization":  {"Bearer sk"},
		"Anthropic-Beta": {"b"},
	}
	for name, copyHeaders := range map[string]func(dst, src http.Header){"request": copyRequestHeaders, "response": copyResponseHeaders} {
		dst := http.Header{}
		copyHeaders(dst, src)
		for _, k := range []string{"Connection", "X-Hop", "X-Other-Hop"} {
			if v := dst.Get(k); v != "" {
				t.Errorf("%s: %s passed on: %q", name, k, v)
			}
		}
		if dst.Get("Anthropic-Beta") != "b" {
			t.Errorf("%s: an end-to-end header was dropped: %v", name, dst)
		}
	}
}

// TestHopByHopHeadersDropped: every hop-by-hop header of httputil's list
// goes no further in either direction; before, a provider's
// Proxy-Authorization reached the client.
func TestHopByHopHeadersDropped(t *testing.T) {
	// httputil's hopHeaders.
	hop := []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
		"Te", "Trailer", "Transfer-Encoding", "Upgrade"}
	src := http.Header{"X-Request-Id": {"r1"}}
	for _, k := range hop {
		src.Set(k, "v")
	}
	for name, copyHeaders := range map[string]func(dst, src http.Header){"request": copyRequestHeaders, "response": copyResponseHeaders} {
		dst := http.Header{}
		copyHeaders(dst, src)
		for _, k := range hop {
			if v := dst.Get(k); v != "" {
				t.Errorf("%s: %s passed on: %q", name, k, v)
			}
		}
		if dst.Get("X-Request-Id") != "r1" {
			t.Errorf("%s: an end-to-end header was dropped: %v", name, dst)
		}
	}
}
