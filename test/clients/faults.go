package clients

import (
	"io"
	"net/http"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// Fault is a failure the provider answers a request with instead of
// serving it, as a provider under load does: nothing is billed, and the
// client is expected to retry.
type Fault struct {
	// Status and Type are the HTTP status and the error's type (429
	// rate_limit_error, 529 overloaded_error, 500 api_error).
	Status int
	Type   string
	// RetryAfter, when set, is the Retry-After header (seconds).
	RetryAfter string
	// CutAfter, instead of a status, serves the request and cuts its
	// event stream after that many events (the connection drops): the
	// client never sees the usage, so the call is not counted as billed
	// (Cut).
	CutAfter int
}

// SetFaults makes the provider answer its at-th request (counted from 1
// over every model request it receives, side requests too) with the
// fault given for it.
func (p *Provider) SetFaults(faults map[int]Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = faults
}

// Faulted is how many requests the provider answered with a fault, and
// the exchanges (headerExchange) they belonged to.
func (p *Provider) Faulted() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for k, v := range p.faulted {
		out[k] = v
	}
	return out
}

// fault answers r with the fault set for it, if any; it reports whether
// it did.
func (p *Provider) fault(w http.ResponseWriter, r *http.Request) bool {
	p.mu.Lock()
	p.received++
	f, ok := p.faults[p.received]
	if ok && f.CutAfter > 0 {
		if p.cutting == nil {
			p.cutting = map[*http.Request]int{}
		}
		p.cutting[r] = f.CutAfter
	}
	if ok {
		if p.faulted == nil {
			p.faulted = map[string]int{}
		}
		p.faulted[r.Header.Get(headerExchange)]++
	}
	p.mu.Unlock()
	if !ok || f.CutAfter > 0 {
		return false
	}
	_, _ = io.Copy(io.Discard, r.Body)
	if f.RetryAfter != "" {
		w.Header().Set("Retry-After", f.RetryAfter)
	}
	gatewaytest.WriteError(w, r.URL.Path, f.Status, f.Type, "injected failure: "+f.Type)
	return true
}

// faulting serves a model route through fault first.
func (p *Provider) faulting(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if p.fault(w, r) {
			return
		}
		p.mu.Lock()
		n, cut := p.cutting[r]
		delete(p.cutting, r)
		p.mu.Unlock()
		if !cut {
			h(w, r)
			return
		}
		h(&cutWriter{ResponseWriter: w, left: n, cut: func() { p.markCut(r.Header.Get(headerExchange)) }}, r)
	}
}

// markCut marks the calls of exchange seq whose stream was cut as not
// billed: the provider never told the client their usage.
func (p *Provider) markCut(seq string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.calls {
		if p.calls[i].Header.Get(headerExchange) == seq && !p.calls[i].Cut {
			p.calls[i].Cut = true
			p.calls[i].Billed = Usage{}
		}
	}
}

// cutWriter passes on left events of an event stream, then drops the
// connection.
type cutWriter struct {
	http.ResponseWriter
	left int
	cut  func()
}

func (c *cutWriter) Write(b []byte) (int, error) {
	if c.Header().Get("Content-Type") != "text/event-stream" {
		return c.ResponseWriter.Write(b)
	}
	for i := 0; i+1 < len(b); i++ {
		if b[i] == '\n' && b[i+1] == '\n' {
			c.left--
			if c.left == 0 {
				_, _ = c.ResponseWriter.Write(b[:i+2])
				c.Flush()
				c.cut()
				panic(http.ErrAbortHandler)
			}
		}
	}
	return c.ResponseWriter.Write(b)
}

func (c *cutWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
