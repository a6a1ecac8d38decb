package gateway

import (
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/contextd/contextd/internal/auth"
)

// Admit: the first stage of a door's request (exchange.go). The caller is
// authenticated by contextd's own key and held to its tenant's rate limit,
// the body is read (at most MaxBodyBytes, a JSON object) and the door
// parses its conversation. The passthrough and count_tokens routes admit
// their callers with the same admit.

// admit is the stage: false when the request was refused (and answered).
func (x *exchange) admit() bool {
	tenant, ok := x.g.admit(x.w, x.r, x.shape)
	if !ok {
		return false
	}
	rb, ok := x.g.readBody(x.w, x.r, x.shape)
	if !ok {
		return false
	}
	c, err := x.d.parse(rb)
	if err != nil {
		x.g.writeDomainError(x.r.Context(), x.w, x.shape, err)
		return false
	}
	x.tenant, x.rb, x.c = tenant, rb, c
	// After the body: an upload slower than the waits' bound spent it
	// before the request's work began (TestArrivedAfterTheBody).
	x.arrived = time.Now()
	return true
}

// admit authenticates the caller by X-Contextd-Key and applies the tenant's
// rate limit. The provider's own credentials (Authorization, x-api-key)
// are not contextd's and are never read here.
func (g *Gateway) admit(w http.ResponseWriter, r *http.Request, shape wireShape) (string, bool) {
	if !g.cfg.Keys.Enabled() && crossSite(r) {
		// Without keys anything that reaches the port is served: a web
		// page must not be able to make a browser spend the user's
		// provider (a local model needs no key) through it.
		writeError(w, shape, http.StatusForbidden, errAuth, "a request from a web page of another site is refused when the server has no API keys")
		return "", false
	}
	if r.Method == http.MethodPost && !isJSON(r.Header.Get("Content-Type")) && !(g.cfg.Keys.Enabled() && g.route(r.URL.Path) == nil) {
		// Provider APIs take JSON; a browser can send other types to
		// another site without asking it first. (With keys, a request
		// carries X-Contextd-Key, which no page sends to another site
		// without asking it first: uploads pass through.)
		writeError(w, shape, http.StatusUnsupportedMediaType, errInvalid, "Content-Type must be application/json")
		return "", false
	}
	tenant := auth.DefaultTenant
	if g.cfg.Keys.Enabled() {
		token := r.Header.Get(HeaderKey)
		if token == "" {
			writeError(w, shape, http.StatusUnauthorized, errAuth, "missing contextd credentials: send the header "+HeaderKey+": <contextd API key> (the provider's key stays in Authorization or x-api-key)")
			return "", false
		}
		key, err := g.cfg.Keys.Authenticate(token)
		if err != nil {
			writeError(w, shape, http.StatusUnauthorized, errAuth, "contextd credentials refused: "+err.Error())
			return "", false
		}
		tenant = key.Tenant
	}
	if g.cfg.Limiter != nil {
		if err := g.cfg.Limiter.Limit(auth.WithTenant(r.Context(), tenant)); err != nil {
			writeError(w, shape, http.StatusTooManyRequests, errRateLimit, err.Error())
			return "", false
		}
	}
	return tenant, true
}

// crossSite reports a request a browser sent from a page of another site:
// its Origin is not a loopback address, or Sec-Fetch-Site says so. SDKs
// and command-line clients send neither.
func crossSite(r *http.Request) bool {
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return true
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	u, err := url.Parse(origin)
	if err != nil {
		return true
	}
	switch u.Hostname() {
	case "localhost", "127.0.0.1", "::1":
		return false
	}
	return true
}

func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}
