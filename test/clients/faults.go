package clients

import (
	"bytes"
	"io"
	"net/http"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// Fault is a failure the provider answers a request with instead of
// serving it, as a provider under load does: nothing is billed (but for a
// cut stream: what it had reported), and the client is expected to retry.
type Fault struct {
	// Status and Type are the HTTP status and the error's type (429
	// rate_limit_error, 529 overloaded_error, 500 api_error).
	Status int
	Type   string
	// RetryAfter, when set, is the Retry-After header (seconds).
	RetryAfter string
	// CutAfter, instead of a status, serves the request and cuts its
	// event stream after that many events (the connection drops). The
	// call is billed as Anthropic bills a stream it could not finish:
	// what the events before the cut reported (Call.Cut, markCut).
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
		cw := &cutWriter{ResponseWriter: w, left: n}
		cw.cut = func() { p.markCut(r.Header.Get(headerExchange), cw.told) }
		h(cw, r)
	}
}

// told is how much of a call's usage its events had reported when its
// stream was cut.
type told int

const (
	toldNothing told = iota // OpenAI: the usage comes last
	toldInput               // Anthropic's message_start: the input, one output token
	toldAll                 // message_delta, the usage chunk, response.completed
)

// markCut marks the calls of exchange seq whose stream was cut, and bills
// them what the stream had reported (t): Anthropic bills the input its
// message_start reported (the assumption here: the output it told, one
// token, not what it generated after); OpenAI's usage comes last, so
// nothing. Whole keeps what the call would have billed.
func (p *Provider) markCut(seq string, t told) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.calls {
		c := &p.calls[i]
		if c.Header.Get(headerExchange) != seq || c.Cut {
			continue
		}
		c.Cut, c.Whole = true, c.Billed
		switch t {
		case toldNothing:
			c.Billed = Usage{}
		case toldInput:
			c.Billed.Output = 1
		}
	}
}

// cutWriter passes on left events of an event stream, then drops the
// connection; told is what the events passed on reported of the usage.
type cutWriter struct {
	http.ResponseWriter
	left int
	cut  func()
	told told
}

func (c *cutWriter) Write(b []byte) (int, error) {
	if c.Header().Get("Content-Type") != "text/event-stream" {
		return c.ResponseWriter.Write(b)
	}
	for i := 0; i+1 < len(b); i++ {
		if b[i] == '\n' && b[i+1] == '\n' {
			c.left--
			if c.left == 0 {
				c.tells(b[:i+2])
				_, _ = c.ResponseWriter.Write(b[:i+2])
				c.Flush()
				c.cut()
				panic(http.ErrAbortHandler)
			}
		}
	}
	c.tells(b)
	return c.ResponseWriter.Write(b)
}

// tells notes what the bytes passed on report of the usage.
func (c *cutWriter) tells(b []byte) {
	switch {
	case bytes.Contains(b, []byte("message_delta")), bytes.Contains(b, []byte("response.completed")),
		bytes.Contains(b, []byte(`"usage":{`)) && !bytes.Contains(b, []byte("message_start")):
		c.told = toldAll
	case bytes.Contains(b, []byte("message_start")):
		c.told = max(c.told, toldInput)
	}
}

func (c *cutWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
