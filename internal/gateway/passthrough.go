package gateway

import (
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
func (g *Gateway) servePassthrough(w http.ResponseWriter, r *http.Request) {
	shape := shapeOf(r)
	if _, ok := g.admit(w, r, shape); !ok {
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
	g.credentials(req.Header, shape)
	resp, err := g.client.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			writeError(w, shape, http.StatusBadGateway, errUpstream, "the provider could not be reached: "+upstreamReason(err))
		}
		return
	}
	defer resp.Body.Close()
	copyResponseHeaders(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	g.copyBody(ctx, w, resp.Body)
}
