package gateway

import (
	"errors"
	"io"
	"net/http"
	"strings"
)

// servePassthrough forwards a /v1/ request contextd has no door for
// (batches, embeddings, files, GET /v1/responses/{id},
// /v1/responses/compact, ...) to the provider unchanged: method, path,
// query, headers (but hop-by-hop ones and contextd's own), body, and the
// answer back as it comes (streamed, flushed per read). Nothing is
// recorded: there is no conversation. The caller is admitted as at a door
// (contextd's key, the tenant's rate limit).
//
// The upstream is Anthropic's for an Anthropic client (anthropic-version,
// an x-api-key without Authorization, or a /v1/messages path), OpenAI's
// otherwise; OpenAI's base URL carries /v1 itself.
//
// What a tenant may reach is bounded: only the provider APIs' methods,
// only paths under the base URL (no dot segment, escaped or not, which an
// upstream or a proxy before it would resolve out of the base or onto a
// door's path), and, when contextd has API keys (several tenants), never
// the server's provider keys: under one provider account, files, batches
// and stored responses made with them would be every tenant's to list,
// read and delete.
func (g *Gateway) servePassthrough(w http.ResponseWriter, r *http.Request) {
	shape := shapeOf(r)
	if _, ok := g.admit(w, r, shape); !ok {
		return
	}
	if !passMethods[r.Method] {
		w.Header().Set("Allow", "GET, HEAD, POST, PUT, PATCH, DELETE")
		writeError(w, shape, http.StatusMethodNotAllowed, errInvalid, "contextd's gateway passes GET, HEAD, POST, PUT, PATCH and DELETE through to the provider, not "+r.Method)
		return
	}
	if dotSegment(r.URL.Path) {
		writeError(w, shape, http.StatusBadRequest, errInvalid, "path: a . or .. segment (escaped or not) is not passed through to the provider")
		return
	}
	path := r.URL.EscapedPath()
	target := g.cfg.OpenAIBaseURL + strings.TrimPrefix(path, "/v1")
	if shape == shapeAnthropic {
		target = g.cfg.AnthropicBaseURL + path
	}
	if r.URL.RawQuery != "" {
		target += "?" + r.URL.RawQuery
	}
	ctx := r.Context()
	var body io.Reader = http.NoBody
	if r.Body != nil && r.ContentLength != 0 {
		body = http.MaxBytesReader(w, r.Body, g.cfg.MaxBodyBytes)
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, target, body)
	if err != nil {
		writeError(w, shape, http.StatusBadRequest, errInvalid, "the request cannot be forwarded: "+err.Error())
		return
	}
	req.ContentLength = r.ContentLength
	copyRequestHeaders(req.Header, r.Header)
	if !g.cfg.Keys.Enabled() {
		g.credentials(req.Header, shape)
	}
	resp, err := g.client.Do(req)
	if err != nil {
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			writeError(w, shape, http.StatusRequestEntityTooLarge, errTooLarge, g.tooLarge())
		case ctx.Err() == nil:
			writeError(w, shape, http.StatusBadGateway, errUpstream, "the provider could not be reached: "+upstreamReason(err))
		}
		return
	}
	defer resp.Body.Close()
	copyResponseHeaders(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	g.copyBody(ctx, w, resp.Body)
}

// passMethods are the methods of the providers' HTTP APIs; others (TRACE,
// which echoes the request's headers, a lent key among them; CONNECT) are
// not passed through.
var passMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true,
	http.MethodPut: true, http.MethodPatch: true, http.MethodDelete: true,
}

// dotSegment reports a path (decoded: %2e%2e and %2f are already . and /)
// with a . or .. segment, / or \ separated.
func dotSegment(path string) bool {
	for seg := range strings.FieldsFuncSeq(path, func(r rune) bool { return r == '/' || r == '\\' }) {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}
