package gateway

import (
	"net/http"
	"net/textproto"
	"strings"
)

// Headers: what goes upstream of the client's headers and what comes back
// of the provider's. Hop-by-hop headers (RFC 9110 7.6.1), the fixed list
// and those a message's Connection header names, go no further in either
// direction, as net/http/httputil.ReverseProxy drops them.

// hopByHop are the hop-by-hop headers (RFC 9110 7.6.1), the list
// net/http/httputil.ReverseProxy drops in both directions.
var hopByHop = []string{
	"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Proxy-Connection",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// dropRequest: the hop-by-hop headers and what the gateway sets itself.
var dropRequest = withHopByHop(
	"Host", "Content-Length",
	// Cookies are contextd's origin's (a dashboard's), not the provider's.
	"Cookie",
	// The transport asks for gzip itself and decompresses, so the answer
	// can be read for its usage.
	"Accept-Encoding",
)

// dropResponse: the hop-by-hop headers and what the server sets itself
// (the answer is relayed decompressed, its length its own).
var dropResponse = withHopByHop("Content-Length", "Content-Encoding")

func withHopByHop(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range append(names, hopByHop...) {
		m[n] = true
	}
	return m
}

// connectionNamed is the headers a message's Connection header names:
// hop-by-hop for this one connection (RFC 9110 7.6.1), dropped as
// net/http/httputil.ReverseProxy drops them, in both directions.
func connectionNamed(h http.Header) map[string]bool {
	var named map[string]bool
	for _, v := range h.Values("Connection") {
		for f := range strings.SplitSeq(v, ",") {
			if f = textproto.TrimString(f); f != "" {
				if named == nil {
					named = map[string]bool{}
				}
				named[http.CanonicalHeaderKey(f)] = true
			}
		}
	}
	return named
}

// copyRequestHeaders forwards the client's headers (its provider
// credentials among them) except hop-by-hop ones and contextd's own.
func copyRequestHeaders(dst, src http.Header) {
	named := connectionNamed(src)
	for k, vs := range src {
		if dropRequest[k] || named[k] || len(k) > len("X-Contextd-") && http.CanonicalHeaderKey(k[:len("X-Contextd-")]) == "X-Contextd-" {
			continue
		}
		dst[k] = append([]string(nil), vs...)
	}
}

func copyResponseHeaders(dst, src http.Header) {
	named := connectionNamed(src)
	for k, vs := range src {
		// The provider's CORS grants and cookies are for its own origin,
		// not for contextd's.
		if dropResponse[k] || named[k] || strings.HasPrefix(k, "Access-Control-") || k == "Set-Cookie" {
			continue
		}
		dst[k] = append(dst[k], vs...)
	}
}

// credentials adds the server's provider key when the client sent none
// and the operator allowed it (CONTEXTD_GATEWAY_SERVER_KEYS): the keys are
// configured for the summarizers, and lending them to every caller is a
// decision of its own.
func (g *Gateway) credentials(h http.Header, shape wireShape) {
	if !g.cfg.LendKeys || h.Get("Authorization") != "" || h.Get("X-Api-Key") != "" {
		return
	}
	switch shape {
	case shapeAnthropic:
		if g.cfg.AnthropicAPIKey != "" {
			h.Set("X-Api-Key", g.cfg.AnthropicAPIKey)
		}
	default:
		if g.cfg.OpenAIAPIKey != "" {
			h.Set("Authorization", "Bearer "+g.cfg.OpenAIAPIKey)
		}
	}
}
